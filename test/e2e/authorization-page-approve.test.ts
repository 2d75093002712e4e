/**
 * The authorization page for a token without permit (NoReturnToken, shaped like mainnet USDT), in
 * Chromium against a stack of its own whose chain accepts only that token: before the customer acts
 * the page says that one approval transaction is needed, that their wallet pays its gas in the chain's
 * native currency, why, and that later charges cost them no gas. Then the customer approves (paying
 * gas), signs, and a charge costs them nothing but its amount.
 */
import { readFileSync } from "node:fs";
import {
  type Address,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  getContractAddress,
  http,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoReturnTokenAbi, NoReturnTokenBytecode } from "../../abis/NoReturnToken.ts";
import { localChain, type ScratchStack, startScratchStack } from "../../scripts/stack/scratch-stack.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { hostedPageBrowser, TestWallet } from "./browser-wallet.ts";
import { api } from "./helpers.ts";

const { openPage, shot, button, expectNoProblems } = hostedPageBrowser("test-results/authorization-page");

const KEY = `sk_test_approve${"2468013579".repeat(3)}`;
const ONE_ETH = 10n ** 18n;

/** The token's deployer: the chain config names the token's address before it is deployed. */
const deployer = privateKeyToAccount(generatePrivateKey());
const token: Address = getContractAddress({ from: deployer.address, nonce: 0n });

let scratch: ScratchStack;
let chain: ResolvedChain;
let client: ReturnType<typeof createPublicClient>;

const call = (path: string, body?: unknown) =>
  api(path, { key: KEY, baseUrl: scratch.stack.apiUrl, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  scratch = await startScratchStack("approve-page", {
    chains: [
      localChain({
        name: "Chain of a token without permit",
        tokens: [{ symbol: "NRT", decimals: 6, address: token }],
      }),
    ],
    devApiKey: KEY,
    logLevel: "Error",
  });
  chain = (JSON.parse(readFileSync(scratch.stack.chainsFile, "utf8")) as { chains: ResolvedChain[] })
    .chains[0] as ResolvedChain;
  client = createPublicClient({ transport: http(chain.rpc.http[0]) });
  await client.request({
    method: "anvil_setBalance",
    params: [deployer.address, `0x${ONE_ETH.toString(16)}`],
  } as never);
  const wallet = createWalletClient({ account: deployer, transport: http(chain.rpc.http[0]) });
  const hash = await wallet.deployContract({
    abi: NoReturnTokenAbi,
    bytecode: NoReturnTokenBytecode,
    chain: null,
  });
  const receipt = await client.waitForTransactionReceipt({ hash });
  expect(receipt.contractAddress?.toLowerCase()).toBe(token.toLowerCase());
}, 180_000);

afterAll(async () => {
  await scratch?.stop();
});

describe("hosted authorization page, token without permit", () => {
  it("says before anything is signed that one approval transaction costs the customer gas, why, and that charges don't", async () => {
    const opened = await call("/v1/mandates", { cap_decimal: "25", period: "month", customer: "cus_nrt" });
    expect(opened.status, opened.text).toBe(200);
    const mandate = opened.json as { id: string; authorization_url: string };
    const session = await (await fetch(`${mandate.authorization_url}/session`)).json();
    expect(session.token).toMatchObject({ symbol: "NRT", permit: false });

    // The customer holds the tokens and some ETH for the approval's gas.
    const customer = new TestWallet({ rpcUrl: chain.rpc.http[0] });
    await client.request({
      method: "anvil_setBalance",
      params: [customer.address, `0x${ONE_ETH.toString(16)}`],
    } as never);
    const minter = createWalletClient({ account: deployer, transport: http(chain.rpc.http[0]) });
    await client.waitForTransactionReceipt({
      hash: await minter.writeContract({
        address: token,
        abi: NoReturnTokenAbi,
        functionName: "mint",
        args: [customer.address, 100_000_000n],
        chain: null,
      }),
    });

    const page = await openPage(mandate.authorization_url, customer);
    await button(page, "Connect wallet").waitFor();
    const notice = page.getByRole("complementary", { name: "This token needs one approval transaction" });
    expect(await notice.textContent()).toContain(
      "NRT doesn't support gasless approvals (EIP-2612 permits), so your wallet sends one approval transaction on Chain of a token without permit and pays its network fee (gas) in ETH. After that, every charge costs you no gas: the payment service sends each one and pays its fees.",
    );
    expect(await page.locator(".steps").textContent()).toContain("Approve NRT");
    expect(customer.calls).toEqual([]);
    await shot(page, "approve-notice");

    await button(page, "Connect wallet").click();
    await button(page, "Sign and authorize").click();
    await page.getByRole("heading", { name: "You're all set" }).waitFor({ timeout: 60_000 });
    expect(await notice.isHidden()).toBe(true);

    // The terms signed, then one approve transaction from the customer's wallet, which paid its gas.
    expect(customer.methods().filter((m) => m === "eth_signTypedData_v4")).toHaveLength(1);
    const sent = customer.calls.filter((c) => c.method === "eth_sendTransaction");
    expect(sent).toHaveLength(1);
    expect(sent[0]?.params[0]).toMatchObject({ to: token, data: expect.stringMatching(/^0x095ea7b3/) });
    expect(
      await client.readContract({
        address: token,
        abi: erc20Abi,
        functionName: "allowance",
        args: [customer.address, chain.escrow.address],
      }),
    ).toBe(300_000_000n);
    const afterApproval = await client.getBalance({ address: customer.address });
    expect(afterApproval).toBeLessThan(ONE_ETH);
    let status = "";
    await waitFor(
      async () => {
        status = (await call(`/v1/mandates/${mandate.id}`)).json.status;
        return status === "active";
      },
      { timeoutMs: 60_000, intervalMs: 200, what: `mandate ${mandate.id} to be active` },
    );

    // A charge: the tokens move, the customer's ETH does not.
    const charged = await call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    expect(charged.status, charged.text).toBe(200);
    let charge = charged.json as { id: string; status: string };
    await waitFor(
      async () => {
        charge = (await call(`/v1/charges/${charge.id}`)).json;
        return charge.status === "succeeded" || charge.status === "failed";
      },
      { timeoutMs: 60_000, intervalMs: 200, what: `charge ${charge.id} to settle` },
    );
    expect(charge.status).toBe("succeeded");
    expect(
      await client.readContract({
        address: token,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [customer.address],
      }),
    ).toBe(90_000_000n);
    expect(await client.getBalance({ address: customer.address })).toBe(afterApproval);
    await page.close();
    expectNoProblems();
  });
});
