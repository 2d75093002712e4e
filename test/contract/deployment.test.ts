/**
 * Deploying our contracts the way an operator does on a real chain: through the canonical CREATE2 proxy,
 * deployed first by its published transaction where the chain lacks it (anvil without its preinstalled
 * one), and where anvil already has it. Same addresses on both chains; a second run sends nothing; the
 * collector the escrow creates is where deposit addresses are computed from; `npm run deploy` prints
 * the config lines and refuses a publicly known key.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getContractAddress,
  type Hex,
  http,
  keccak256,
  type PublicClient,
  parseEther,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DepositCollectorRuntime } from "../../abis/DepositCollector.ts";
import { MandateEscrowAbi, MandateEscrowBytecode } from "../../abis/MandateEscrow.ts";
import {
  CREATE2_PROXY,
  CREATE2_PROXY_SIGNER,
  deployDeterministic,
  deploymentBlock,
  deterministicAddress,
  ESCROW_CONTRACT,
  ensureCreate2Proxy,
} from "../../scripts/contracts/deterministic-deployment.ts";
import { type RunningAnvil, rpc, startAnvil } from "../../scripts/stack/anvil.ts";
import { LOCAL_DEPLOYER_KEY, resolveLocalChain } from "../../scripts/stack/local-chain.ts";
import { freePort } from "../../scripts/stack/wait.ts";
import { collectorAddress } from "../../service/payments/deposit-address.ts";

const anvils: RunningAnvil[] = [];
afterAll(async () => {
  for (const anvil of anvils) await anvil.stop();
});

const chainOn = async (chainId: number, withoutCreate2Proxy: boolean) => {
  const anvil = await startAnvil({ port: await freePort(), chainId, withoutCreate2Proxy });
  anvils.push(anvil);
  const chain = defineChain({
    id: chainId,
    name: `anvil ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [anvil.http] } },
  });
  const client = createPublicClient({ chain, transport: http(anvil.http) }) as PublicClient;
  /** A deployer of the operator's own (not one of anvil's public accounts), funded by the test. */
  const key = generatePrivateKey();
  const account = privateKeyToAccount(key);
  await rpc(anvil.http, "anvil_setBalance", [account.address, `0x${parseEther("10").toString(16)}`]);
  const writer = createWalletClient({ chain, account, transport: http(anvil.http) });
  return { anvil, client, writer, key, account };
};

const hasCode = async (client: PublicClient, address: Hex) =>
  ((await client.getCode({ address })) ?? "0x") !== "0x";

const runDeploy = (args: string[], env: Record<string, string>) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(process.execPath, ["scripts/deploy.ts", ...args], {
      env: { ...process.env, CHAINS_CONFIG: "config/chains.json", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once("exit", (code) => resolve({ code, output }));
  });

describe("deterministic deployment", () => {
  let bare: Awaited<ReturnType<typeof chainOn>>;
  let preinstalled: Awaited<ReturnType<typeof chainOn>>;
  beforeAll(async () => {
    [bare, preinstalled] = await Promise.all([chainOn(8453, true), chainOn(10, false)]);
  });

  it("deploys the proxy by its published transaction where the chain lacks it, then the escrow and its collector", async () => {
    expect(await hasCode(bare.client, CREATE2_PROXY)).toBe(false);
    expect(await ensureCreate2Proxy(bare.client, bare.writer)).toBe(true);
    expect(await hasCode(bare.client, CREATE2_PROXY)).toBe(true);
    expect(await bare.client.getTransactionCount({ address: CREATE2_PROXY_SIGNER })).toBe(1);

    const [escrow] = await deployDeterministic(bare.client, bare.writer);
    if (escrow === undefined) throw new Error("nothing deployed");
    expect(escrow).toMatchObject({ name: "MandateEscrow", deployed: true });
    expect(escrow.address).toBe(deterministicAddress(ESCROW_CONTRACT));
    // The collector is the escrow's nonce-1 contract: the address deposit addresses are computed from.
    const collector = await bare.client.readContract({
      address: escrow.address,
      abi: MandateEscrowAbi,
      functionName: "collector",
    });
    expect(collector.toLowerCase()).toBe(collectorAddress(escrow.address));
    expect(escrow.created).toEqual([{ name: "DepositCollector", address: collector }]);
    expect((await bare.client.getCode({ address: collector }))?.length).toBe(DepositCollectorRuntime.length);
    expect(await deploymentBlock(bare.client, escrow.address)).toBe(escrow.block);
  });

  it("sends nothing on a second run", async () => {
    const nonce = await bare.client.getTransactionCount({ address: bare.account.address });
    expect(await ensureCreate2Proxy(bare.client, bare.writer)).toBe(false);
    const again = await deployDeterministic(bare.client, bare.writer);
    expect(again.map((result) => [result.name, result.deployed, result.transaction])).toEqual([
      ["MandateEscrow", false, undefined],
    ]);
    expect(await bare.client.getTransactionCount({ address: bare.account.address })).toBe(nonce);
  });

  it("uses anvil's preinstalled proxy and lands at the same address on another chain", async () => {
    expect(await hasCode(preinstalled.client, CREATE2_PROXY)).toBe(true);
    expect(await ensureCreate2Proxy(preinstalled.client, preinstalled.writer)).toBe(false);
    const [here] = await deployDeterministic(preinstalled.client, preinstalled.writer);
    const [there] = await deployDeterministic(bare.client, bare.writer);
    expect(here?.deployed).toBe(true);
    expect(here?.address).toBe(there?.address);
  });

  it("says so when the proxy can no longer be deployed at its address (its signer's nonce 0 is spent)", async () => {
    const spent = await chainOn(137, true);
    await rpc(spent.anvil.http, "anvil_setNonce", [CREATE2_PROXY_SIGNER, "0x1"]);
    await expect(ensureCreate2Proxy(spent.client, spent.writer)).rejects.toThrow(
      /one-time signer .* has already sent 1 transaction/,
    );
  });
});

describe("the local stack", () => {
  const LOCAL = {
    id: 31337,
    name: "local",
    livemode: false,
    local: { port: 0 },
    escrow: {},
    tokens: [{ symbol: "USDC", decimals: 6, deploy: "TestUSDC" as const }],
    subscriptions_available: true,
    payments_available: true,
    escrow_available: true,
    hold_seconds: 0,
    confirmations: 0,
  };

  it("deploys the escrow through the proxy, at the address it has on every chain", async () => {
    const { anvil } = await chainOn(31337, false);
    const dir = mkdtempSync(join(tmpdir(), "local-deploy-"));
    try {
      const resolved = await resolveLocalChain(LOCAL, anvil, join(dir, "deployments.json"));
      expect(resolved.escrow.address).toBe(deterministicAddress(ESCROW_CONTRACT));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps the escrow a chain kept in .data got before (by plain CREATE)", async () => {
    const { anvil, client } = await chainOn(31337, false);
    const dir = mkdtempSync(join(tmpdir(), "local-deploy-"));
    try {
      const deployer = createWalletClient({
        account: privateKeyToAccount(LOCAL_DEPLOYER_KEY),
        transport: http(anvil.http),
      });
      const hash = await deployer.deployContract({
        abi: MandateEscrowAbi,
        bytecode: MandateEscrowBytecode,
        chain: undefined,
      });
      const receipt = await client.waitForTransactionReceipt({ hash });
      const old = {
        address: receipt.contractAddress,
        block: Number(receipt.blockNumber),
        codeHash: keccak256(MandateEscrowBytecode),
      };
      const file = join(dir, "deployments.json");
      writeFileSync(file, JSON.stringify({ "31337": { MandateEscrow: old } }));
      const resolved = await resolveLocalChain(LOCAL, anvil, file);
      expect(resolved.escrow).toEqual({ address: old.address, start_block: old.block });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("npm run deploy", () => {
  it("deploys, prints the addresses, the start block and the config lines; a second run deploys nothing", async () => {
    const chain = await chainOn(42161, true);
    const first = await runDeploy(["--chain", "42161", "--rpc", chain.anvil.http], {
      DEPLOYER_PRIVATE_KEY: chain.key,
    });
    expect(first.code, first.output).toBe(0);
    const escrow = deterministicAddress(ESCROW_CONTRACT);
    const block = await deploymentBlock(chain.client, escrow);
    expect(first.output).toContain(`CREATE2 proxy ${CREATE2_PROXY}: deployed by its published transaction`);
    expect(first.output).toContain(`MandateEscrow ${escrow}: deployed in block ${block}`);
    // Printed checksummed: the escrow's nonce-1 contract.
    expect(first.output).toContain(`DepositCollector ${getContractAddress({ from: escrow, nonce: 1n })}:`);
    expect(first.output).toContain(`Start block: ${block}`);
    expect(first.output).toContain(`"escrow": { "address": "${escrow}", "start_block": ${block} },`);
    expect(first.output).toContain('"native_currency": { "name": "Ether", "symbol": "ETH", "decimals": 18 }');
    expect(first.output).toContain("escrow and collector code: ok");

    const nonce = await chain.client.getTransactionCount({ address: chain.account.address });
    const second = await runDeploy(["--chain", "42161", "--rpc", chain.anvil.http], {
      DEPLOYER_PRIVATE_KEY: chain.key,
    });
    expect(second.code, second.output).toBe(0);
    expect(second.output).toContain("Nothing to deploy: every contract is already on this chain.");
    expect(second.output).toContain(`MandateEscrow ${escrow}: already deployed, nothing sent`);
    expect(second.output).toContain(`Start block: ${block}`);
    expect(await chain.client.getTransactionCount({ address: chain.account.address })).toBe(nonce);
  });

  it("refuses a publicly known key, no key, an RPC of another chain and a local chain, sending nothing", async () => {
    const chain = await chainOn(8453, true);
    const anvilKey = await runDeploy(["--chain", "8453", "--rpc", chain.anvil.http], {
      DEPLOYER_PRIVATE_KEY: LOCAL_DEPLOYER_KEY,
    });
    expect(anvilKey.code).toBe(2);
    expect(anvilKey.output).toContain(
      "deploy: refusing a publicly known key (account 0 of anvil's and Hardhat's default mnemonic)",
    );
    const otherChain = await runDeploy(["--chain", "1", "--rpc", chain.anvil.http], {
      DEPLOYER_PRIVATE_KEY: chain.key,
    });
    expect(otherChain.code).toBe(2);
    expect(otherChain.output).toContain(`deploy: ${chain.anvil.http} is chain 8453, not 1`);
    const noKey = await runDeploy(["--chain", "8453", "--rpc", chain.anvil.http], {
      DEPLOYER_PRIVATE_KEY: "",
    });
    expect(noKey.code).toBe(2);
    expect(noKey.output).toContain("deploy: DEPLOYER_PRIVATE_KEY is not set");
    const local = await runDeploy(["--chain", "31337"], { DEPLOYER_PRIVATE_KEY: chain.key });
    expect(local.code).toBe(2);
    expect(local.output).toContain("deploy: chain 31337 is local in config/chains.json");
    expect(await hasCode(chain.client, CREATE2_PROXY)).toBe(false);
  });
});
