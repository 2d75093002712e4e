/**
 * Safe 1.4.1 customers, against the real Safe bytecode (deployed by the local stack, safe-wallet.ts) and
 * Circle's USDC: a deployed one-owner Safe signs a mandate on the page's API (terms and USDC permit, both
 * ERC-1271), is charged and its hold released, and pays a one-time payment with EIP-3009, all without gas
 * for the Safe or its owner; a counterfactual Safe signs with ERC-6492 wrappers and the relayer deploys
 * it first, refusing wrong inner signatures, other factories and factory calls that deploy elsewhere
 * with nothing sent; a Safe whose owner changes keeps its mandate as the escrow recorded it and re-signs
 * with the new owner only; a two-owner Safe, whose signatures are longer than 65 bytes, cannot carry the
 * permit and approves the escrow instead.
 */
import {
  decodeFunctionData,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  hashTypedData,
  type PrivateKeyAccount,
  parseAbi,
  type TypedDataDefinition,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { verifyHash } from "viem/actions";
import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { TERMS_TYPES } from "../../service/mandates/terms.ts";
import { type PageTypedData, signPageTerms } from "../contract/harness.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { paySession, postAuthorization, signTransferAuthorization } from "./gasless-authorizations.ts";
import { api, type EventOf, expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";
import { safeAbi, safesOn } from "./safe-wallet.ts";

const MONTH = 31 * 86_400;
const newOwner = () => privateKeyToAccount(generatePrivateKey());

let driver: ReturnType<typeof chainDriver>;
let safes: ReturnType<typeof safesOn>;
let m: Awaited<ReturnType<typeof merchantOnTestChain>>;
beforeAll(async () => {
  driver = chainDriver(31337);
  safes = safesOn(driver);
  m = await merchantOnTestChain();
});

const waitForEvent = async (type: string, id: string) =>
  (await m.waitForEvents(type, 1, (object) => object.id === id))[0] as EventOf;

/** A mandate of the test's merchant and its authorization link's token. */
const openMandate = async (extra: Record<string, unknown> = {}) => {
  const opened = await m.call("/v1/mandates", {
    cap_decimal: "10",
    period: "month",
    customer: "cus_safe",
    ...extra,
  });
  expect(opened.status, opened.text).toBe(200);
  const mandate = opened.json as { id: string; authorization_url: string };
  return { ...mandate, token: mandate.authorization_url.split("/authorize/")[1] ?? "" };
};

const termsFor = async (token: string, customer: Hex) => {
  const requested = await api(`/authorize/${token}/terms`, {
    key: null,
    idempotencyKey: null,
    body: { customer_address: customer },
  });
  expect(requested.status, requested.text).toBe(200);
  return requested.json as { terms: PageTypedData; permit: PageTypedData | null };
};

const submitSignatures = (token: string, body: unknown) =>
  api(`/authorize/${token}/signatures`, { key: null, idempotencyKey: null, body });

type Signer = Pick<PrivateKeyAccount, "address" | "signTypedData">;
const asSigner = (signer: { address: Hex; signTypedData: (t: TypedDataDefinition) => Promise<Hex> }) =>
  signer as Signer;

/** The relayer's transactions whose action or purpose starts with `prefix`. */
const relayed = async (prefix: string) =>
  query<{ purpose: string; action: string | null; status: string; data: Hex; hashes: Hex[] }>(
    "SELECT purpose, action, status, data, hashes FROM billing.relayer_transactions WHERE starts_with(action, $1) OR starts_with(purpose, $1) ORDER BY created_at",
    [prefix],
  );
const mandateActions = (mandateId: string) => relayed(`authorize:31337:${mandateId.toLowerCase()}:`);
const deployments = (address: Hex) => relayed(`wallet-deployment:31337:${address.toLowerCase()}`);

const hasCode = async (address: Hex) => ((await driver.client.getCode({ address })) ?? "0x") !== "0x";
const ethOf = (address: Hex) => driver.client.getBalance({ address });
const allowance = (owner: Hex) =>
  driver.client.readContract({
    address: driver.usdc,
    abi: erc20Abi,
    functionName: "allowance",
    args: [owner, driver.escrow],
  });

describe("Safe 1.4.1 on the local stack", () => {
  it("is deployed on every local chain, and its factory is the chain's wallet factory", async () => {
    for (const chainId of [31337, 31339]) {
      const on = safesOn(chainDriver(chainId));
      for (const address of Object.values(on.contracts)) expect(await hasCode(address), address).toBe(true);
      expect(
        await driver.client.readContract({
          address: safes.contracts.singleton,
          abi: safeAbi,
          functionName: "VERSION",
        }),
      ).toBe("1.4.1");
      expect(chainDriver(chainId).resolved.wallet_factories).toEqual([on.contracts.factory]);
    }
  });
});

describe("a deployed one-owner Safe as the customer", () => {
  it("signs the mandate (terms and USDC permit, ERC-1271) on the page's API, is charged and released, all without gas", async () => {
    const owner = newOwner();
    const safe = await safes.deployed([owner]);
    await driver.mint(safe.address, usd("100"));
    const mandate = await openMandate();
    const { terms, permit } = await termsFor(mandate.token, safe.address);
    expect(permit, "the page asks the Safe for a permit").not.toBeNull();

    // Another key signing for the Safe: refused before anything is sent.
    const stranger = await signPageTerms(
      asSigner(safes.signer(safe, { signers: [newOwner()] })),
      terms,
      permit,
    );
    const refused = await submitSignatures(mandate.token, stranger);
    expect(refused.status, refused.text).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "signature_invalid", param: "signature" });
    expect(await mandateActions(String(terms.message.mandateId))).toHaveLength(0);

    const signed = await signPageTerms(asSigner(safes.signer(safe)), terms, permit);
    expect(signed.signature.length, "a one-owner Safe signs with 65 bytes").toBe(132);
    const accepted = await submitSignatures(mandate.token, signed);
    expect(accepted.status, accepted.text).toBe(200);
    const authorized = await waitForEvent("mandate.authorized", mandate.id);
    expect(authorized.data.object).toMatchObject({ status: "active", customer_address: safe.address });
    for (const t of await query<{ hashes: Hex[] }>(
      "SELECT c.hashes FROM billing.relayer_transactions i JOIN billing.relayer_transactions c ON c.id = i.carrier_id WHERE i.action LIKE $1",
      [`authorize:31337:${String(terms.message.mandateId).toLowerCase()}:%`],
    ))
      console.log((await driver.client.getTransactionReceipt({ hash: t.hashes[0] as Hex })).gasUsed);
    // USDC took the permit through the Safe's ERC-1271 (v, r, s put back together as the Safe's signature).
    expect(await allowance(safe.address)).toBe(usd("120"));

    const charged = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    expect(charged.status, charged.text).toBe(200);
    const chargeId = (charged.json as { id: string }).id;
    await waitForEvent("charge.succeeded", chargeId);
    await m.advance(3601);
    const released = await waitForEvent("charge.released", chargeId);
    expect(released.data.object).toMatchObject({ status: "released" });
    expect(await driver.balanceOf(safe.address)).toBe(usd("90"));
    expect(await driver.balanceOf(m.payoutAddress)).toBe(usd("10"));
    expect([await ethOf(safe.address), await ethOf(owner.address)]).toEqual([0n, 0n]);
  });

  it("pays a one-time payment with EIP-3009 through the pay page's API, verified by ERC-1271 and sent in USDC's bytes form", async () => {
    const owner = newOwner();
    const safe = await safes.deployed([owner]);
    await driver.mint(safe.address, usd("7"));
    const payment = await newPayment("7");
    const current = await paySession(payment.payment_url);

    const wrongKey = await signTransferAuthorization(safes.signer(safe, { signers: [newOwner()] }), current);
    const refused = await postAuthorization(payment.payment_url, wrongKey);
    expect(refused.status, JSON.stringify(refused.json)).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "signature_invalid", param: "signature" });
    expect(await relayed(`pay-gasless:31337:${payment.id}`)).toHaveLength(0);

    const paid = await postAuthorization(
      payment.payment_url,
      await signTransferAuthorization(safes.signer(safe), current),
    );
    expect(paid.status, JSON.stringify(paid.json)).toBe(200);
    const [sent] = await relayed(`pay-gasless:31337:${payment.id}`);
    const call = decodeFunctionData({ abi: usdcTransferAbi, data: sent?.data ?? "0x" });
    expect(call.args, "the bytes overload, the Safe's signature as signed").toHaveLength(7);
    for (const t of await relayed(`pay-gasless:31337:${payment.id}`))
      console.log((await driver.client.waitForTransactionReceipt({ hash: t.hashes[0] as Hex })).gasUsed);
    await m.waitForEvents("payment.paid", 1, (object) => object.id === payment.id);
    expect(await driver.balanceOf(safe.address)).toBe(0n);
    expect([await ethOf(safe.address), await ethOf(owner.address)]).toEqual([0n, 0n]);
  });
});

describe("a counterfactual Safe signing with ERC-6492", () => {
  it("is deployed by the relayer only after its inner signatures hold; a wrong inner signature, another factory or a factory call that deploys elsewhere is refused with nothing sent", async () => {
    const owner = newOwner();
    const safe = await safes.counterfactual([owner]);
    await driver.mint(safe.address, usd("50"));
    const mandate = await openMandate();
    const { terms, permit } = await termsFor(mandate.token, safe.address);
    const mandateId = String(terms.message.mandateId);
    const nothingSent = async () => {
      expect(await hasCode(safe.address)).toBe(false);
      expect(await deployments(safe.address)).toHaveLength(0);
      expect(await mandateActions(mandateId)).toHaveLength(0);
    };
    const refusedWith = async (body: unknown, code: string, param: string) => {
      const answer = await submitSignatures(mandate.token, body);
      expect(answer.status, answer.text).toBe(400);
      expect(expectErrorShape(answer.json)).toMatchObject({ code, param });
      await nothingSent();
    };

    // The inner signature is a stranger's: the x402 facilitators' bypass, which deployed and paid for
    // any well-formed wrapper of an undeployed wallet without checking what it wrapped.
    const forged = await signPageTerms(
      asSigner(safes.signer(safe, { signers: [newOwner()], erc6492: true })),
      terms,
      permit,
    );
    await refusedWith(forged, "signature_invalid", "signature");
    // The terms are the owner's, the permit's inner signature is not.
    const good = await signPageTerms(asSigner(safes.signer(safe, { erc6492: true })), terms, permit);
    await refusedWith(
      { ...good, permit_signature: forged.permit_signature },
      "signature_invalid",
      "permit_signature",
    );

    // A factory not on the chain's allowlist, though it is the same code: refused before any call.
    const otherFactory = await safes.strangerFactory();
    const viaOther = { ...safe, deployment: { ...safe.deployment, factory: otherFactory } };
    const unlisted = await signPageTerms(asSigner(safes.signer(viaOther, { erc6492: true })), terms, permit);
    await refusedWith(unlisted, "wallet_factory_not_allowed", "signature");

    // The allowed factory, called to deploy another Safe: no code at the customer's address.
    const elsewhere = await safes.counterfactual([owner]);
    const misdirected = await signPageTerms(
      asSigner(safes.signer({ ...safe, deployment: elsewhere.deployment }, { erc6492: true })),
      terms,
      permit,
    );
    await refusedWith(misdirected, "wallet_deployment_failed", "signature");

    // viem's verifyHash (the universal validator) agrees with these answers for the terms.
    const termsHash = termsHashOf(terms);
    const viemSays = (signature: string) =>
      verifyHash(driver.client, { address: safe.address, hash: termsHash, signature: signature as Hex });
    expect(await viemSays(good.signature)).toBe(true);
    expect(await viemSays(forged.signature)).toBe(false);
    expect(await viemSays(misdirected.signature)).toBe(false);

    // The owner's wrappers: the relayer deploys the Safe, then records the inner signatures.
    const accepted = await submitSignatures(mandate.token, good);
    expect(accepted.status, accepted.text).toBe(200);
    expect(await hasCode(safe.address)).toBe(true);
    const [deployment, ...more] = await deployments(safe.address);
    expect(more).toHaveLength(0);
    expect(deployment).toMatchObject({
      action: `authorize:31337:${mandateId.toLowerCase()}:wallet`,
      data: safe.deployment.data,
    });
    const receipt = await driver.client.getTransactionReceipt({ hash: deployment?.hashes[0] as Hex });
    expect(receipt.status).toBe("success");
    // Measured: 258,895 gas for a one-owner Safe 1.4.1 with its fallback handler (docs/authorization-page.md).
    expect(receipt.gasUsed).toBeGreaterThan(200_000n);
    expect(receipt.gasUsed).toBeLessThan(300_000n);
    const authorized = await waitForEvent("mandate.authorized", mandate.id);
    expect(authorized.data.object).toMatchObject({ status: "active", customer_address: safe.address });
    // The escrow got the inner signature: the wrapper's bytes are nowhere in what the relayer sent.
    const actions = await mandateActions(mandateId);
    expect(actions.map((a) => a.action)).toEqual([
      `authorize:31337:${mandateId.toLowerCase()}:wallet`,
      `authorize:31337:${mandateId.toLowerCase()}:1`,
    ]);
    expect(actions[1]?.data.toLowerCase()).not.toContain("6492649264926492");
    expect(await allowance(safe.address)).toBe(usd("120"));

    // The same wrappers again, once recorded: the Safe has code now, so they are unwrapped and the
    // escrow's simulation finds the terms signed already; no second deployment or authorization.
    const again = await submitSignatures(mandate.token, good);
    expect(again.status, again.text).toBe(400);
    expect(expectErrorShape(again.json)).toMatchObject({ code: "terms_changed", param: "terms" });
    expect(await deployments(safe.address)).toHaveLength(1);
    expect(await mandateActions(mandateId)).toHaveLength(2);

    const charged = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    expect(charged.status, charged.text).toBe(200);
    await waitForEvent("charge.succeeded", (charged.json as { id: string }).id);
    expect(await driver.balanceOf(safe.address)).toBe(usd("40"));
    expect(await ethOf(owner.address)).toBe(0n);
  });

  it("pays a one-time payment from a counterfactual Safe: the relayer deploys it, then sends the transfer", async () => {
    const owner = newOwner();
    const safe = await safes.counterfactual([owner]);
    await driver.mint(safe.address, usd("3"));
    const payment = await newPayment("3");
    const current = await paySession(payment.payment_url);

    const forged = await signTransferAuthorization(
      safes.signer(safe, { signers: [newOwner()], erc6492: true }),
      current,
    );
    const refused = await postAuthorization(payment.payment_url, forged);
    expect(refused.status, JSON.stringify(refused.json)).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "signature_invalid", param: "signature" });
    expect(await deployments(safe.address)).toHaveLength(0);
    expect(await hasCode(safe.address)).toBe(false);

    const paid = await postAuthorization(
      payment.payment_url,
      await signTransferAuthorization(safes.signer(safe, { erc6492: true }), current),
    );
    expect(paid.status, JSON.stringify(paid.json)).toBe(200);
    expect(await hasCode(safe.address)).toBe(true);
    const sent = await relayed(`pay-gasless:31337:${payment.id}`);
    expect(sent.map((t) => t.action)).toEqual([
      `pay-gasless:31337:${payment.id}:wallet:${safe.address.toLowerCase()}`,
      `pay-gasless:31337:${payment.id}`,
    ]);
    await m.waitForEvents("payment.paid", 1, (object) => object.id === payment.id);
    expect(await ethOf(owner.address)).toBe(0n);
  });
});

describe("a Safe whose owner changes after it signed", () => {
  it("keeps its mandate as the escrow recorded it; a re-signature is judged by the Safe's owners at that moment", async () => {
    const [first, second] = [newOwner(), newOwner()];
    const safe = await safes.deployed([first]);
    await driver.mint(safe.address, usd("100"));
    const mandate = await openMandate({ approval_periods: 2 });
    const initial = await termsFor(mandate.token, safe.address);
    const signed = await signPageTerms(asSigner(safes.signer(safe)), initial.terms, initial.permit);
    expect((await submitSignatures(mandate.token, signed)).status).toBe(200);
    await waitForEvent("mandate.authorized", mandate.id);
    const chargeOk = async () => {
      const charged = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
      expect(charged.status, charged.text).toBe(200);
      return waitForEvent("charge.succeeded", (charged.json as { id: string }).id);
    };
    await chargeOk();

    // The owner changes: the Safe no longer accepts the signature the escrow recorded...
    await safes.swapOwner(safe, second);
    const termsHash = termsHashOf(initial.terms);
    await expect(
      driver.client.readContract({
        address: safe.address,
        abi: safeAbi,
        functionName: "isValidSignature",
        args: [termsHash, signed.signature],
      }),
    ).rejects.toThrow(/GS026/);
    // ...yet the mandate is charged as recorded: charges never ask the wallet again.
    await m.advance(MONTH);
    await chargeOk();

    // The approval (2 × 10) is spent: the next charge asks for a new signature.
    await m.advance(MONTH);
    const exhausted = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    expect(exhausted.json).toMatchObject({ status: "failed", failure_code: "approval_exhausted" });
    await waitForEvent("mandate.requires_authorization", mandate.id);
    const renewal = await termsFor(mandate.token, safe.address);
    expect(renewal.terms.message.nonce).toBe("2");
    const byOld = await signPageTerms(
      asSigner(safes.signer(safe, { signers: [first] })),
      renewal.terms,
      renewal.permit,
    );
    const refused = await submitSignatures(mandate.token, byOld);
    expect(refused.status, refused.text).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "signature_invalid", param: "signature" });
    const byNew = await signPageTerms(asSigner(safes.signer(safe)), renewal.terms, renewal.permit);
    const resigned = await submitSignatures(mandate.token, byNew);
    expect(resigned.status, resigned.text).toBe(200);
    await waitFor(async () => (await m.call(`/v1/mandates/${mandate.id}`)).json.signature_version === 2, {
      timeoutMs: 20_000,
      what: "the re-signature to be recorded",
    });
    await chargeOk();
  });
});

describe("a Safe with two owners", () => {
  it("signs the terms with 130 bytes, which the escrow takes; its permit cannot travel as v, r, s, so it approves the escrow instead", async () => {
    const owners = [newOwner(), newOwner()];
    const safe = await safes.deployed(owners, 2);
    await driver.mint(safe.address, usd("30"));
    const mandate = await openMandate();
    const { terms, permit } = await termsFor(mandate.token, safe.address);
    const signed = await signPageTerms(asSigner(safes.signer(safe)), terms, permit);
    expect(signed.signature.length).toBe(2 + 2 * 130);

    const refused = await submitSignatures(mandate.token, signed);
    expect(refused.status, refused.text).toBe(400);
    const error = expectErrorShape(refused.json);
    expect(error).toMatchObject({ code: "permit_signature_unsupported", param: "permit_signature" });
    expect(error.message).toContain(`${driver.escrow} for 120 USDC`);
    expect(await mandateActions(String(terms.message.mandateId))).toHaveLength(0);

    // What the message says: a Safe transaction approving the escrow (both owners sign, anyone sends);
    // the page's API then asks for the terms alone.
    await safes.execute(
      safe,
      driver.usdc,
      encodeFunctionData({ abi: erc20Abi, functionName: "approve", args: [driver.escrow, usd("120")] }),
    );
    const again = await termsFor(mandate.token, safe.address);
    expect([again.permit, (again as { approve?: unknown }).approve]).toEqual([null, null]);
    const termsOnly = await submitSignatures(
      mandate.token,
      await signPageTerms(asSigner(safes.signer(safe)), again.terms, again.permit),
    );
    expect(termsOnly.status, termsOnly.text).toBe(200);
    await waitForEvent("mandate.authorized", mandate.id);
    const charged = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    await waitForEvent("charge.succeeded", (charged.json as { id: string }).id);
    expect(await driver.balanceOf(safe.address)).toBe(usd("20"));
    for (const owner of owners) expect(await ethOf(owner.address)).toBe(0n);
  });
});

// ---------------------------------------------------------------------------------------------------
// The pay page's JSON API, as its browser client calls it

const usdcTransferAbi = parseAbi([
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
]);

const newPayment = async (amount: string) => {
  const created = await m.call("/v1/payments", { amount_decimal: amount });
  expect(created.status, created.text).toBe(200);
  return created.json as { id: string; payment_url: string };
};

/** Signs the session's TransferWithAuthorization for the whole amount, as the page's wallet would. */

/** The EIP-712 hash of the terms the page handed out (JSON integers back to numbers). */
const termsHashOf = (terms: PageTypedData) =>
  hashTypedData({
    domain: terms.domain,
    types: TERMS_TYPES,
    primaryType: "Terms",
    message: Object.fromEntries(
      TERMS_TYPES.Terms.map(({ name, type }) => [
        name,
        /^u?int/.test(type) ? BigInt(String(terms.message[name])) : terms.message[name],
      ]),
    ) as never,
  });
