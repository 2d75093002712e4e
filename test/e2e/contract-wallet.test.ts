/**
 * A customer whose wallet is a contract (ERC-1271): the hosted page's API takes the wallet's address
 * and its owner's signatures, verifies them through the wallet (the service recovers EOA signatures
 * locally and asks the chain only for the rest), the escrow checks them again on chain, and the
 * mandate is then charged from the wallet like any other.
 */
import { createWalletClient, encodeDeployData, getAddress, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { TestWalletAbi, TestWalletBytecode } from "../../abis/TestWallet.ts";
import { type PageTypedData, signPageTerms } from "../contract/harness.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { api, type EventOf, expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";

let driver: ReturnType<typeof chainDriver>;
beforeAll(() => {
  driver = chainDriver(31337);
});

/** Deploys a wallet owned by `owner` from a fresh funded account, and mints it `funds` of the token. */
const contractWallet = async (owner: `0x${string}`, funds: bigint) => {
  const deployer = privateKeyToAccount(generatePrivateKey());
  await driver.rpc("anvil_setBalance", [deployer.address, "0xde0b6b3a7640000"]);
  const wallet = createWalletClient({
    chain: driver.client.chain,
    transport: http(driver.resolved.rpc.http[0]),
    account: deployer,
  });
  const hash = await wallet.sendTransaction({
    data: encodeDeployData({ abi: TestWalletAbi, bytecode: TestWalletBytecode, args: [owner] }),
  });
  const receipt = await driver.client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  if (!receipt.contractAddress) throw new Error("the wallet was not deployed");
  await driver.mint(receipt.contractAddress, funds);
  return getAddress(receipt.contractAddress);
};

describe("a contract wallet (ERC-1271) as the customer", () => {
  it("authorizes through the page's API with its owner's signatures, refuses a stranger's, and is charged", async () => {
    const m = await merchantOnTestChain();
    const owner = privateKeyToAccount(generatePrivateKey());
    const stranger = privateKeyToAccount(generatePrivateKey());
    const wallet = await contractWallet(owner.address, usd("100"));

    const opened = await m.call("/v1/mandates", {
      cap_decimal: "25",
      period: "month",
      customer: "cus_wallet",
    });
    expect(opened.status, opened.text).toBe(200);
    const mandate = opened.json as { id: string; authorization_url: string };
    const token = mandate.authorization_url.split("/authorize/")[1] ?? "";

    const requested = await api(`/authorize/${token}/terms`, {
      key: null,
      idempotencyKey: null,
      body: { customer_address: wallet },
    });
    expect(requested.status, requested.text).toBe(200);
    const { terms, permit } = requested.json as { terms: PageTypedData; permit: PageTypedData | null };
    // The wallet has not approved the escrow: the page asks for a permit, which the token checks
    // through the wallet as well.
    expect(permit).not.toBeNull();

    const submit = async (signer: typeof owner) =>
      api(`/authorize/${token}/signatures`, {
        key: null,
        idempotencyKey: null,
        body: { ...(await signPageTerms(signer, terms, permit)), customer_address: wallet },
      });
    const relayed = () =>
      query<{ n: number }>(
        "SELECT count(*)::int AS n FROM billing.relayer_transactions WHERE action LIKE $1",
        [`authorize:31337:${String(terms.message.mandateId).toLowerCase()}:%`],
      );

    // Signed by someone the wallet does not accept: refused before anything is sent.
    const refused = await submit(stranger);
    expect(refused.status, refused.text).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "signature_invalid", param: "signature" });
    expect((await relayed())[0]?.n).toBe(0);

    const accepted = await submit(owner);
    expect(accepted.status, accepted.text).toBe(200);
    const [authorized] = (await m.waitForEvents(
      "mandate.authorized",
      1,
      (object) => object.id === mandate.id,
    )) as EventOf[];
    expect(authorized?.data.object).toMatchObject({
      status: "active",
      customer_address: wallet,
    });

    const charged = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    expect(charged.status, charged.text).toBe(200);
    const chargeId = (charged.json as { id: string }).id;
    await m.waitForEvents("charge.succeeded", 1, (object) => object.id === chargeId);
    expect(await driver.balanceOf(wallet)).toBe(usd("90"));
  });
});
