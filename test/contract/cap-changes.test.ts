/**
 * Changing a mandate's cap and revoking it without gas, on the escrow itself (Circle's USDC):
 * - a raise is only ever a new signature of the customer (re-signed terms with the higher cap, and a permit
 *   for the new total approval, in one `authorizeWithPermit` or `authorizeMany`); nobody else can raise;
 * - `lowerCap` by the operator or the payee narrows the cap at once and caps the approval left at
 *   `newCap * approvalPeriods`; it never raises and never touches payee, token, anchor or nonce;
 * - `revokeWithSignature`: the customer's EIP-712 `Revoke` (an EOA's or an ERC-1271 wallet's), submitted
 *   by anyone; replayed, front-run, expired, forged or moved to another mandate, chain or contract, it
 *   changes nothing more.
 */
import {
  concat,
  encodeAbiParameters,
  erc20Abi,
  getAddress,
  type Hex,
  keccak256,
  parseEventLogs,
  parseUnits,
  toHex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { TestWalletBytecode } from "../../abis/TestWallet.ts";
import {
  type Address,
  accountAt,
  type Chain,
  mandateIdFor,
  mandateTerms,
  type ReceiptOutcome,
  startChain,
  type Terms,
} from "./harness.ts";

const operator = accountAt(1);
const payee = accountAt(2);
const customer = accountAt(3);
const stranger = accountAt(4);
const usd = (n: string) => parseUnits(n, 6);
const DAY = 86_400;
const MAX = 2n ** 256n - 1n;

let chain: Chain;
let salt = 1n;

beforeAll(async () => {
  chain = await startChain();
  await chain.mint(chain.usdc, customer.address, usd("10000"));
  await chain.send(customer, chain.usdc, erc20Abi, "approve", [chain.escrow, MAX]);
});
afterAll(async () => {
  await chain?.stop();
});

const failure = (name: string) => ({ ok: false, error: name });
const termsFor = (overrides: Partial<Terms> = {}, who: Address = customer.address): Terms =>
  mandateTerms(chain, { customer: who, payee: payee.address, operator: operator.address }, salt++, {
    cap: usd("50"),
    approvalPeriods: 3,
    deadline: BigInt(chain.clock.now + 3600),
    ...overrides,
  });
const authorize = async (terms: Terms, signer = customer) =>
  chain.send(operator, chain.escrow, MandateEscrowAbi, "authorize", [
    terms,
    await chain.signTerms(signer, terms),
  ]);
const charge = (id: Hex, amount: bigint) =>
  chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [id, amount]);
const lower = (id: Hex, cap: bigint, by = operator) =>
  chain.sendForReceipt(by, chain.escrow, MandateEscrowAbi, "lowerCap", [id, cap]);
const view = (id: Hex) =>
  chain.read<{
    cap: bigint;
    approvalLeft: bigint;
    nonce: bigint;
    payee: string;
    token: string;
    anchor: bigint;
  }>(chain.escrow, MandateEscrowAbi, "mandate", [id]);
const receiptOf = (outcome: ReceiptOutcome) => {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.error}`);
  return outcome.receipt;
};
const eventsOf = (outcome: ReceiptOutcome) =>
  parseEventLogs({ abi: MandateEscrowAbi, logs: receiptOf(outcome).logs }).map((log) => [
    log.eventName,
    log.args,
  ]);
const signed = async (id: Hex) => {
  const terms = termsFor({ mandateId: id });
  expect((await authorize(terms)).ok).toBe(true);
  return terms;
};

describe("MandateEscrow: raising a cap takes the customer's signature", () => {
  it("raises the cap of the same mandate by a re-signature with a permit for the new approval; the old cap holds until then", async () => {
    const gasless = accountAt(6);
    await chain.mint(chain.usdc, gasless.address, usd("1000"));
    const terms = termsFor({}, gasless.address);
    const withPermit = async (t: Terms, value: bigint) => {
      const p = await chain.signPermit(gasless, chain.usdc, value, t.deadline);
      return chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeWithPermit", [
        t,
        await chain.signTerms(gasless, t),
        value,
        t.deadline,
        p.v,
        p.r,
        p.s,
      ]);
    };
    expect((await withPermit(terms, usd("150"))).ok).toBe(true);
    expect((await charge(terms.mandateId, usd("50"))).ok).toBe(true);
    // Until the customer signs, a charge above the old cap is refused.
    chain.clock.advance(32 * DAY);
    expect(await charge(terms.mandateId, usd("80"))).toEqual(failure("CapExceeded"));
    const raised = { ...terms, cap: usd("80"), nonce: 2n, deadline: BigInt(chain.clock.now + 3600) };
    expect((await withPermit(raised, usd("240"))).ok).toBe(true);
    const after = await view(terms.mandateId);
    expect({ cap: after.cap, approvalLeft: after.approvalLeft, nonce: after.nonce }).toEqual({
      cap: usd("80"),
      approvalLeft: usd("240"),
      nonce: 2n,
    });
    expect(await chain.read(chain.usdc, erc20Abi, "allowance", [gasless.address, chain.escrow])).toBe(
      usd("240"),
    );
    expect((await charge(terms.mandateId, usd("80"))).ok).toBe(true);
  });

  it("lets nobody but the customer raise: not the payee's or a stranger's signature, not lowerCap, not a re-signature changing payee, token or anchor", async () => {
    const terms = termsFor();
    expect((await authorize(terms)).ok).toBe(true);
    const raised = { ...terms, cap: usd("80"), nonce: 2n };
    expect(await authorize(raised, payee)).toEqual(failure("InvalidSignature"));
    expect(await authorize(raised, stranger)).toEqual(failure("InvalidSignature"));
    expect(await authorize(raised, operator)).toEqual(failure("InvalidSignature"));
    for (const by of [operator, payee, stranger, customer])
      expect(await lower(terms.mandateId, usd("80"), by)).toEqual(
        failure(by === operator || by === payee ? "CapNotLowered" : "NotOperator"),
      );
    expect(await lower(terms.mandateId, usd("50"))).toEqual(failure("CapNotLowered"));
    expect(await authorize({ ...raised, payee: stranger.address })).toEqual(failure("TermsMismatch"));
    expect(await authorize({ ...raised, anchor: raised.anchor + 1n })).toEqual(failure("TermsMismatch"));
    expect((await view(terms.mandateId)).cap).toBe(usd("50"));
    // The customer's own signature raises it.
    expect((await authorize(raised)).ok).toBe(true);
    expect((await view(terms.mandateId)).cap).toBe(usd("80"));
  });
});

describe("MandateEscrow: lowerCap", () => {
  it("lowers the cap at once for the operator or the payee, capping the approval left at newCap × approvalPeriods", async () => {
    // cap 50 × 3 periods = 150; one charge of 50 leaves 100.
    const terms = termsFor();
    expect((await authorize(terms)).ok).toBe(true);
    expect((await charge(terms.mandateId, usd("50"))).ok).toBe(true);
    const lowered = await lower(terms.mandateId, usd("20"));
    expect(eventsOf(lowered)).toEqual([
      [
        "CapLowered",
        {
          mandateId: terms.mandateId,
          previousCap: usd("50"),
          cap: usd("20"),
          approvalLeft: usd("60"),
          by: operator.address,
        },
      ],
    ]);
    const after = await view(terms.mandateId);
    expect(after).toMatchObject({ cap: usd("20"), approvalLeft: usd("60"), nonce: 1n, anchor: terms.anchor });
    expect(after.payee.toLowerCase()).toBe(payee.address.toLowerCase());
    expect(after.token.toLowerCase()).toBe(chain.usdc.toLowerCase());
    // The payee may lower it too; an approval left under the new limit stays as it is.
    chain.clock.advance(32 * DAY);
    expect(await charge(terms.mandateId, usd("21"))).toEqual(failure("CapExceeded"));
    expect((await charge(terms.mandateId, usd("20"))).ok).toBe(true);
    const byPayee = await lower(terms.mandateId, usd("15"), payee);
    expect(eventsOf(byPayee)).toEqual([
      [
        "CapLowered",
        {
          mandateId: terms.mandateId,
          previousCap: usd("20"),
          cap: usd("15"),
          approvalLeft: usd("40"),
          by: payee.address,
        },
      ],
    ]);
    const more = termsFor();
    expect((await authorize(more)).ok).toBe(true);
    expect((await charge(more.mandateId, usd("50"))).ok).toBe(true);
    chain.clock.advance(32 * DAY);
    expect((await charge(more.mandateId, usd("50"))).ok).toBe(true);
    // 50 left, under 40 × 3 = 120: kept.
    expect((await lower(more.mandateId, usd("40"))).ok).toBe(true);
    expect((await view(more.mandateId)).approvalLeft).toBe(usd("50"));
    // The customer's next signature restores the approval at the cap it names.
    const resigned = { ...more, cap: usd("40"), nonce: 2n, deadline: BigInt(chain.clock.now + 3600) };
    expect((await authorize(resigned)).ok).toBe(true);
    expect((await view(more.mandateId)).approvalLeft).toBe(usd("120"));
  });

  it("refuses anyone else, no change or a raise, 0, an unknown or a revoked mandate", async () => {
    const terms = termsFor();
    expect((await authorize(terms)).ok).toBe(true);
    expect(await lower(terms.mandateId, usd("10"), stranger)).toEqual(failure("NotOperator"));
    expect(await lower(terms.mandateId, usd("10"), customer)).toEqual(failure("NotOperator"));
    expect(await lower(terms.mandateId, usd("50"))).toEqual(failure("CapNotLowered"));
    expect(await lower(terms.mandateId, usd("51"))).toEqual(failure("CapNotLowered"));
    expect(await lower(terms.mandateId, 0n)).toEqual(failure("CapNotLowered"));
    expect(await lower(mandateIdFor(customer.address, 777_777n), 1n)).toEqual(failure("UnknownMandate"));
    expect((await chain.send(customer, chain.escrow, MandateEscrowAbi, "revoke", [terms.mandateId])).ok).toBe(
      true,
    );
    expect(await lower(terms.mandateId, usd("10"))).toEqual(failure("Revoked"));
  });
});

describe("MandateEscrow: revokeWithSignature", () => {
  const revoke = (id: Hex, deadline: bigint, signature: Hex, by = stranger) =>
    chain.sendForReceipt(by, chain.escrow, MandateEscrowAbi, "revokeWithSignature", [
      id,
      deadline,
      signature,
    ]);

  it("revokes by the customer's signature, submitted by anyone: the customer sends nothing", async () => {
    const terms = await signed(mandateIdFor(customer.address, salt++));
    const deadline = BigInt(chain.clock.now + 600);
    const nonce = await chain.publicClient.getTransactionCount({ address: customer.address });
    const outcome = await revoke(
      terms.mandateId,
      deadline,
      await chain.signRevocation(customer, terms.mandateId, deadline),
    );
    expect(eventsOf(outcome)).toEqual([
      ["MandateRevoked", { mandateId: terms.mandateId, customer: customer.address }],
    ]);
    expect(await chain.read(chain.escrow, MandateEscrowAbi, "mandate", [terms.mandateId])).toMatchObject({
      revoked: true,
    });
    expect(await charge(terms.mandateId, usd("1"))).toEqual(failure("Revoked"));
    expect(await chain.publicClient.getTransactionCount({ address: customer.address })).toBe(nonce);
  });

  it("refuses a forged, moved, expired or replayed revocation; a front-run one leaves the later submission with Revoked", async () => {
    const terms = await signed(mandateIdFor(customer.address, salt++));
    const other = await signed(mandateIdFor(customer.address, salt++));
    const deadline = BigInt(chain.clock.now + 600);
    const id = terms.mandateId;
    expect(await revoke(id, deadline, await chain.signRevocation(stranger, id, deadline))).toEqual(
      failure("InvalidSignature"),
    );
    expect(await revoke(id, deadline, await chain.signRevocation(payee, id, deadline))).toEqual(
      failure("InvalidSignature"),
    );
    // Signed for another mandate, chain or contract, or with another deadline.
    expect(
      await revoke(id, deadline, await chain.signRevocation(customer, other.mandateId, deadline)),
    ).toEqual(failure("InvalidSignature"));
    expect(
      await revoke(id, deadline, await chain.signRevocation(customer, id, deadline, chain.escrow, 1)),
    ).toEqual(failure("InvalidSignature"));
    expect(
      await revoke(id, deadline, await chain.signRevocation(customer, id, deadline, chain.usdc)),
    ).toEqual(failure("InvalidSignature"));
    const good = await chain.signRevocation(customer, id, deadline);
    expect(await revoke(id, deadline + 1n, good)).toEqual(failure("InvalidSignature"));
    const past = BigInt(chain.clock.now - 1);
    expect(await revoke(id, past, await chain.signRevocation(customer, id, past))).toEqual(
      failure("SignatureExpired"),
    );
    expect(await revoke(mandateIdFor(customer.address, 888_888n), deadline, good)).toEqual(
      failure("UnknownMandate"),
    );
    expect((await view(id)).cap).toBe(usd("50"));
    // A stranger submits the customer's signature first (front-running): revoked once; the operator's
    // submission and every replay revert with Revoked and emit nothing.
    expect(eventsOf(await revoke(id, deadline, good, stranger))).toEqual([
      ["MandateRevoked", { mandateId: id, customer: customer.address }],
    ]);
    expect(await revoke(id, deadline, good, operator)).toEqual(failure("Revoked"));
    expect(await revoke(id, deadline, good, stranger)).toEqual(failure("Revoked"));
    // Revocation is final: the customer's new signature cannot bring the mandate back.
    expect(await authorize({ ...terms, nonce: 2n })).toEqual(failure("Revoked"));
    // The other mandate is untouched.
    expect((await charge(other.mandateId, usd("1"))).ok).toBe(true);
  });

  it("takes an ERC-1271 smart wallet's revocation, signed by its owner", async () => {
    const owner = privateKeyToAccount(keccak256(toHex("revoking wallet owner")));
    const wallet = await chain.deploy(
      [],
      concat([TestWalletBytecode, encodeAbiParameters([{ type: "address" }], [owner.address])]),
    );
    const terms = termsFor({}, wallet);
    expect((await authorize(terms, owner)).ok).toBe(true);
    const deadline = BigInt(chain.clock.now + 600);
    expect(
      await revoke(
        terms.mandateId,
        deadline,
        await chain.signRevocation(stranger, terms.mandateId, deadline),
      ),
    ).toEqual(failure("InvalidSignature"));
    const outcome = await revoke(
      terms.mandateId,
      deadline,
      await chain.signRevocation(owner, terms.mandateId, deadline),
    );
    expect(eventsOf(outcome)).toEqual([
      ["MandateRevoked", { mandateId: terms.mandateId, customer: getAddress(wallet) }],
    ]);
  });
});
