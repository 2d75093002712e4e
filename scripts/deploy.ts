/**
 * `npm run deploy -- --chain <id> [--rpc <url>]`: puts our contracts on a chain that is not local, at
 * the addresses they have on every chain (scripts/contracts/deterministic-deployment.ts), and prints
 * what to add to the chain config. Idempotent: a second run finds them and sends nothing.
 *
 * The RPC is `--rpc`, else the chain's first `rpc.http` in the chain config (CHAINS_CONFIG, default
 * config/chains.json). The deployer's key is DEPLOYER_PRIVATE_KEY (an environment variable, so it stays out of
 * the shell's history and the process list when read with `read -rs`); a publicly known key is refused. The deployer pays the gas and nothing else: the contracts
 * have no owner, so the key holds no rights afterwards.
 */
import { parseArgs } from "node:util";
import { Effect } from "effect";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  formatUnits,
  type Hex,
  http,
  type PublicClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { verifyChains } from "../service/chains/chain-verification.ts";
import { type ChainConfig, loadChainsFile } from "../service/chains/config.ts";
import { publiclyKnownKey } from "../service/chains/public-keys.ts";
import {
  BILLING_CONTRACTS,
  CREATE2_PROXY,
  type Deployed,
  deployDeterministic,
  deploymentBlock,
  ensureCreate2Proxy,
} from "./contracts/deterministic-deployment.ts";

// Typed on the name, so that a call narrows like a throw.
const fail: (message: string) => never = (message) => {
  console.error(`deploy: ${message}`);
  process.exit(2);
};

const { values } = parseArgs({
  options: { chain: { type: "string" }, rpc: { type: "string" }, help: { type: "boolean" } },
  strict: true,
});
if (values.help || values.chain === undefined)
  fail("usage: DEPLOYER_PRIVATE_KEY=0x… npm run deploy -- --chain <id> [--rpc <url>]");
const chainId = Number(values.chain);
if (!Number.isSafeInteger(chainId) || chainId <= 0) fail(`--chain must be a chain id, got ${values.chain}`);

const configPath = process.env.CHAINS_CONFIG ?? "config/chains.json";
const loaded = await Effect.runPromise(Effect.result(loadChainsFile(configPath)));
const configured: ChainConfig | undefined =
  loaded._tag === "Success" ? loaded.success.chains.find((chain) => chain.id === chainId) : undefined;
if (configured?.local) fail(`chain ${chainId} is local in ${configPath}: npm start deploys local chains`);
const rpcUrl = values.rpc ?? configured?.rpc?.http[0];
if (rpcUrl === undefined)
  fail(
    loaded._tag === "Failure"
      ? `${loaded.failure.message} (or pass --rpc <url>)`
      : `no RPC for chain ${chainId}: pass --rpc <url>, or list the chain with its rpc in ${configPath}`,
  );

const key = process.env.DEPLOYER_PRIVATE_KEY?.trim() ?? "";
if (key === "")
  fail(
    "DEPLOYER_PRIVATE_KEY is not set (read it without echo: read -rs DEPLOYER_PRIVATE_KEY; export DEPLOYER_PRIVATE_KEY)",
  );
if (!/^0x[0-9a-fA-F]{64}$/.test(key)) fail("the deployer key must be 0x followed by 64 hex digits");
const known = publiclyKnownKey(key as Hex);
if (known !== undefined)
  fail(`refusing a publicly known key (${known}): anyone can take what it holds; use a key of your own`);
const account = privateKeyToAccount(key as Hex);

const chain = defineChain({
  id: chainId,
  name: configured?.name ?? `chain ${chainId}`,
  nativeCurrency: configured?.native_currency ?? { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpcUrl] } },
});
const client = createPublicClient({ chain, transport: http(rpcUrl, { timeout: 30_000 }) }) as PublicClient;
const writer = createWalletClient({ chain, account, transport: http(rpcUrl, { timeout: 30_000 }) });

const rpcChainId = await client.getChainId().catch((error: unknown) => fail(`${rpcUrl}: ${String(error)}`));
if (rpcChainId !== chainId) fail(`${rpcUrl} is chain ${rpcChainId}, not ${chainId}`);

const symbol = chain.nativeCurrency.symbol;
const balance = await client.getBalance({ address: account.address });
console.log(`Chain ${chainId} (${chain.name}) at ${rpcUrl}`);
console.log(`Deployer ${account.address}: ${formatUnits(balance, chain.nativeCurrency.decimals)} ${symbol}`);

const proxyDeployed = await ensureCreate2Proxy(client, writer).catch((error: unknown) =>
  fail(error instanceof Error ? error.message : String(error)),
);
console.log(
  `CREATE2 proxy ${CREATE2_PROXY}: ${proxyDeployed ? "deployed by its published transaction" : "present"}`,
);
const results: Deployed[] = await deployDeterministic(client, writer, BILLING_CONTRACTS).catch(
  (error: unknown) => fail(error instanceof Error ? error.message : String(error)),
);

/** The block to index the escrow from: its deployment's (this run's, the config's, or found on chain). */
const startBlock = async (escrow: Deployed): Promise<bigint | undefined> => {
  if (escrow.block !== undefined) return escrow.block;
  if (
    configured?.escrow.address?.toLowerCase() === escrow.address.toLowerCase() &&
    configured.escrow.start_block !== undefined
  )
    return BigInt(configured.escrow.start_block);
  return deploymentBlock(client, escrow.address);
};

for (const result of results) {
  console.log(
    result.deployed
      ? `${result.name} ${result.address}: deployed in block ${result.block} (transaction ${result.transaction})`
      : `${result.name} ${result.address}: already deployed, nothing sent`,
  );
  for (const created of result.created)
    console.log(`${created.name} ${created.address}: created by ${result.name}'s constructor`);
}
if (!proxyDeployed && results.every((result) => !result.deployed))
  console.log("Nothing to deploy: every contract is already on this chain.");

const escrow = results.find((result) => result.name === "MandateEscrow");
if (escrow === undefined) fail("no MandateEscrow among the deployed contracts");
const block = await startBlock(escrow as Deployed);
const escrowLine = `"escrow": { "address": "${escrow?.address}", "start_block": ${block ?? "<the block of the escrow's deployment transaction>"} },`;
const currencyLine = configured?.native_currency
  ? ""
  : `\n  "native_currency": { "name": "Ether", "symbol": "ETH", "decimals": 18 },   (check: the chain's own coin)`;
console.log(`
Start block: ${block ?? "unknown (this node keeps no past state: take the block of the escrow's deployment from an explorer)"}
Add to chain ${chainId}'s entry in ${configPath}:
  ${escrowLine}${currencyLine}`);

// What the service and the indexer will check at start, on what this run knows.
const verified = await Effect.runPromise(
  Effect.result(
    verifyChains([
      {
        id: chainId,
        name: chain.name,
        rpc: { http: [rpcUrl] },
        escrow: { address: escrow?.address, ...(block === undefined ? {} : { start_block: Number(block) }) },
        tokens: configured?.tokens ?? [],
      },
    ]),
  ),
);
if (verified._tag === "Failure") {
  console.log(`\nChecks the service and the indexer make at start:\n${verified.failure.message}`);
  process.exit(1);
}
console.log(
  `\nChecked as the service and the indexer will at start: chain id, escrow and collector code${configured?.tokens.length ? ", tokens" : ""}: ok.`,
);
