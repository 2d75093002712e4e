/**
 * The start checks of a chain that is not local (service/chains/chain-verification.ts), against anvil
 * chains configured as an operator would configure Base: each rule refuses with its one line, and the
 * service (`node service/main.ts`) and the indexer (`ponder start`) refuse to start on it.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Effect } from "effect";
import { createPublicClient, createWalletClient, type Hex, http, type PublicClient, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { TestUSDCAbi, TestUSDCBytecode } from "../../abis/TestUSDC.ts";
import { TestWalletRuntime } from "../../abis/TestWallet.ts";
import { deployDeterministic, ensureCreate2Proxy } from "../../scripts/contracts/deterministic-deployment.ts";
import { type RunningAnvil, rpc, startAnvil } from "../../scripts/stack/anvil.ts";
import { LOCAL_RELAYER_KEY } from "../../scripts/stack/local-chain.ts";
import { freePort } from "../../scripts/stack/wait.ts";
import { type ChainToVerify, verifyChains } from "../../service/chains/chain-verification.ts";
import { collectorAddress } from "../../service/chains/contract-code.ts";
import { generateSecretsKey } from "../../service/webhooks/secret-box.ts";

const CHAIN_ID = 8453;
const anvils: RunningAnvil[] = [];
let base: ChainToVerify & { readonly rpc: { readonly http: readonly [string] } };
let escrow: Hex;
let usdc: Hex;
let client: PublicClient;
let otherChainUrl: string;
const dir = mkdtempSync(join(tmpdir(), "chain-verification-"));

beforeAll(async () => {
  const [anvil, other] = await Promise.all([
    startAnvil({ port: await freePort(), chainId: CHAIN_ID }),
    startAnvil({ port: await freePort(), chainId: 10 }),
  ]);
  anvils.push(anvil, other);
  otherChainUrl = other.http;
  client = createPublicClient({ transport: http(anvil.http) }) as PublicClient;
  const account = privateKeyToAccount(generatePrivateKey());
  await rpc(anvil.http, "anvil_setBalance", [account.address, `0x${parseEther("10").toString(16)}`]);
  const writer = createWalletClient({ account, transport: http(anvil.http) });
  await ensureCreate2Proxy(client, writer);
  const [deployed] = await deployDeterministic(client, writer);
  if (deployed?.block === undefined) throw new Error("escrow not deployed");
  escrow = deployed.address;
  const hash = await writer.deployContract({
    abi: TestUSDCAbi,
    bytecode: TestUSDCBytecode,
    chain: undefined,
  });
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (!receipt.contractAddress) throw new Error("no token");
  usdc = receipt.contractAddress;
  base = {
    id: CHAIN_ID,
    name: "Base on anvil",
    rpc: { http: [anvil.http] },
    escrow: { address: escrow, start_block: Number(deployed.block) },
    tokens: [{ symbol: "USDC", decimals: 6, address: usdc }],
  };
});

afterAll(async () => {
  for (const anvil of anvils) await anvil.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The lines a chain is refused with ([] when it passes). */
const problems = async (chain: ChainToVerify, relayer?: string) => {
  const relayers = new Map(relayer === undefined ? [] : [[chain.id, relayer]]);
  const result = await Effect.runPromise(Effect.result(verifyChains([chain], { relayers })));
  return result._tag === "Success" ? [] : result.failure.problems;
};

const at = (rule: string) => `chain ${CHAIN_ID} (Base on anvil): ${rule}`;

describe("the start checks of a chain that is not local", () => {
  it("pass a chain deployed by npm run deploy's path, with a relayer key of the operator's own", async () => {
    expect(await problems(base, privateKeyToAccount(generatePrivateKey()).address)).toEqual([]);
  });

  it("leave local chains to the stack that deployed them", async () => {
    expect(await problems({ ...base, local: { port: 0 }, escrow: {}, tokens: [] })).toEqual([]);
  });

  it("refuse an RPC whose eth_chainId differs, whichever URL of the chain it is", async () => {
    expect(await problems({ ...base, id: 84532 })).toEqual([
      `chain 84532 (Base on anvil): eth_chainId of rpc.http[0] is ${CHAIN_ID}, not 84532`,
    ]);
    expect(await problems({ ...base, rpc: { http: [base.rpc.http[0], otherChainUrl] } })).toEqual([
      at(`eth_chainId of rpc.http[1] is 10, not ${CHAIN_ID}`),
    ]);
  });

  it("refuse an escrow address without code, or with code other than the compiled escrow", async () => {
    const nobody = privateKeyToAccount(generatePrivateKey()).address;
    expect(await problems({ ...base, escrow: { ...base.escrow, address: nobody } })).toEqual([
      at(`escrow.address ${nobody} has no code (deploy it with npm run deploy)`),
    ]);
    const [wrong] = await problems({ ...base, escrow: { ...base.escrow, address: usdc } });
    expect(wrong).toContain(at(`escrow.address ${usdc} is not the compiled MandateEscrow (code hash 0x`));
  });

  it("refuse an escrow whose collector (where deposit addresses come from) is not the compiled collector", async () => {
    const collector = collectorAddress(escrow);
    const original = await client.getCode({ address: collector });
    await rpc(base.rpc.http[0], "anvil_setCode", [collector, TestWalletRuntime]);
    try {
      const [line] = await problems(base);
      expect(line).toContain(at(`the escrow's collector ${collector} is not the compiled DepositCollector`));
    } finally {
      await rpc(base.rpc.http[0], "anvil_setCode", [collector, original]);
    }
    expect(await problems(base)).toEqual([]);
  });

  it("refuse a token without code, or whose decimals() differ from the config", async () => {
    const nobody = privateKeyToAccount(generatePrivateKey()).address;
    expect(await problems({ ...base, tokens: [{ symbol: "USDC", decimals: 6, address: nobody }] })).toEqual([
      at(`token USDC ${nobody} has no code`),
    ]);
    expect(await problems({ ...base, tokens: [{ symbol: "USDC", decimals: 18, address: usdc }] })).toEqual([
      at(`token USDC ${usdc} has decimals() 6, config says 18`),
    ]);
  });

  it("refuse a missing start_block", async () => {
    expect(await problems({ ...base, escrow: { address: escrow } })).toEqual([
      at(
        "escrow.start_block is missing (the indexer would read the chain from genesis; npm run deploy prints it)",
      ),
    ]);
  });

  it("refuse a publicly known relayer key", async () => {
    expect(await problems(base, privateKeyToAccount(LOCAL_RELAYER_KEY).address)).toEqual([
      at(
        "the relayer key is publicly known (account 2 of anvil's and Hardhat's default mnemonic); use a key of your own",
      ),
    ]);
  });

  it("refuse an operator that has not named the relayer, and pass once it has (setRelayer)", async () => {
    const operator = privateKeyToAccount(generatePrivateKey());
    const relayer = privateKeyToAccount(generatePrivateKey()).address;
    const chain = { ...base, operator: operator.address };
    expect(await problems(chain, relayer)).toEqual([
      at(
        `operator ${operator.address} has not named relayer ${relayer} on the escrow (npm run relayer -- sign --chain ${CHAIN_ID} --relayer ${relayer} --allowed true, then submit)`,
      ),
    ]);
    const url = base.rpc.http[0];
    await rpc(url, "anvil_setBalance", [operator.address, `0x${parseEther("1").toString(16)}`]);
    const writer = createWalletClient({ account: operator, transport: http(url) });
    const hash = await writer.writeContract({
      address: escrow,
      abi: MandateEscrowAbi,
      functionName: "setRelayer",
      args: [relayer, true],
      chain: null,
    });
    expect((await client.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(await problems(chain, relayer)).toEqual([]);
    // The operator as its own relayer needs no naming.
    expect(await problems(chain, operator.address)).toEqual([]);
  });

  it("refuse a publicly known operator", async () => {
    const anvils0 = privateKeyToAccount(LOCAL_RELAYER_KEY).address;
    const relayer = privateKeyToAccount(generatePrivateKey()).address;
    const found = await problems({ ...base, operator: anvils0 }, relayer);
    expect(found[0]).toBe(
      at(
        `operator ${anvils0} is a publicly known account (account 2 of anvil's and Hardhat's default mnemonic); name one of your own`,
      ),
    );
  });
});

/** A config file of the chain as the operator would write it, with `change` applied. */
const configFile = (name: string, change: Partial<ChainToVerify>) => {
  const file = join(dir, `${name}.json`);
  const chain = { ...base, ...change };
  writeFileSync(
    file,
    JSON.stringify({
      chains: [
        {
          id: chain.id,
          name: chain.name,
          livemode: true,
          rpc: chain.rpc,
          native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
          escrow: chain.escrow,
          tokens: chain.tokens,
          subscriptions_available: true,
          payments_available: true,
          escrow_available: true,
          hold_seconds: 0,
          confirmations: 2,
        },
      ],
    }),
  );
  return file;
};

const run = (args: string[], env: Record<string, string>) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(process.execPath, args, {
      env: { ...process.env, ...env },
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

describe("refusing to start", () => {
  // Nothing listens there: a refusal comes before any connection to the database.
  const NO_DATABASE = "postgres://billing@127.0.0.1:9/billing";

  it("the service, with one line naming the chain and the rule", async () => {
    const result = await run(["service/main.ts"], {
      CHAINS_CONFIG: configFile("wrong-escrow", { escrow: { address: usdc, start_block: 1 } }),
      DATABASE_URL: NO_DATABASE,
      WEBHOOK_SECRETS_KEY: generateSecretsKey(),
      RELAYER_PRIVATE_KEY: LOCAL_RELAYER_KEY,
      PORT: "0",
    });
    expect(result.code, result.output).toBe(2);
    const lines = result.output.trim().split("\n");
    expect(lines[0]).toBe("Refusing to start:");
    expect(lines).toContain(
      at(
        "the relayer key is publicly known (account 2 of anvil's and Hardhat's default mnemonic); use a key of your own",
      ),
    );
    expect(
      lines.some((line) => line.startsWith(at(`escrow.address ${usdc} is not the compiled MandateEscrow`))),
    ).toBe(true);
    expect(lines).toHaveLength(3);
  });

  it("the indexer (ponder start), with the same line", async () => {
    const result = await run(
      [
        "node_modules/ponder/dist/esm/bin/ponder.js",
        "--log-format",
        "json",
        "start",
        "--schema",
        "refused",
        "--port",
        String(await freePort()),
      ],
      {
        CHAINS_CONFIG: configFile("no-start-block", { escrow: { address: escrow } }),
        DATABASE_URL: NO_DATABASE,
      },
    );
    expect(result.code, result.output).toBe(2);
    expect(result.output.trim().split("\n")).toEqual([
      "Refusing to start:",
      at(
        "escrow.start_block is missing (the indexer would read the chain from genesis; npm run deploy prints it)",
      ),
    ]);
  });
});
