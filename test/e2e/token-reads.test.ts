/**
 * How the service establishes a token's EIP-712 domain (TokenReads), on the stack's chain: Circle's USDC
 * has no EIP-5267 `eip712Domain()`, so its domain comes from `name()` and `version()` checked against its
 * `DOMAIN_SEPARATOR()`; our test token declares it by EIP-5267; a token with neither has none (the page
 * then asks for an `approve`); a chain that does not answer is a failure, never "no domain".
 */

import { readFileSync } from "node:fs";
import { Effect, Layer, ManagedRuntime, Option } from "effect";
import { createWalletClient, defineChain, domainSeparator, getAddress, type Hex, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoReturnTokenAbi, NoReturnTokenBytecode } from "../../abis/NoReturnToken.ts";
import { TestUSDCAbi, TestUSDCBytecode } from "../../abis/TestUSDC.ts";
import { freePort } from "../../scripts/stack/wait.ts";
import { ChainClients } from "../../service/chains/chain-clients.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { TokenReads } from "../../service/mandates/token-reads.ts";
import { chainDriver } from "./chain-driver.ts";
import { stack } from "./helpers.ts";

const DOMAIN_SEPARATOR_ABI = [
  {
    type: "function",
    name: "DOMAIN_SEPARATOR",
    stateMutability: "view",
    inputs: [],
    outputs: [{ type: "bytes32" }],
  },
] as const;

let runtime: ManagedRuntime.ManagedRuntime<TokenReads, never>;
let chain: ResolvedChain;
const reads = <A, E>(f: (tokens: TokenReads["Service"]) => Effect.Effect<A, E>) =>
  runtime.runPromise(Effect.flatMap(Effect.service(TokenReads), f));

beforeAll(() => {
  chain = (JSON.parse(readFileSync(stack().chainsFile, "utf8")) as { chains: ResolvedChain[] }).chains.find(
    (c) => c.id === 31337,
  ) as ResolvedChain;
  runtime = ManagedRuntime.make(TokenReads.layer.pipe(Layer.provide(ChainClients.layer)));
});
afterAll(() => runtime?.dispose());

/** Deploys a test contract from a fresh account with gas. */
const deploy = async (abi: typeof TestUSDCAbi | typeof NoReturnTokenAbi, bytecode: Hex) => {
  const driver = chainDriver(31337);
  const account = privateKeyToAccount(generatePrivateKey());
  await driver.rpc("anvil_setBalance", [account.address, "0xde0b6b3a7640000"]);
  const wallet = createWalletClient({
    account,
    chain: defineChain({ ...driver.client.chain }),
    transport: http(chain.rpc.http[0]),
  });
  const hash = await wallet.deployContract({ abi, bytecode });
  const receipt = await driver.client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  if (!receipt.contractAddress) throw new Error("not deployed");
  return receipt.contractAddress;
};

describe("a token's EIP-712 domain", () => {
  it("Circle's USDC: from name() and version(), matching its DOMAIN_SEPARATOR(); it takes permits", async () => {
    const usdc = chain.tokens[0]?.address as Hex;
    const domain = await reads((tokens) => tokens.domain(chain, usdc));
    expect(Option.getOrUndefined(domain)).toEqual({
      name: "USD Coin",
      version: "2",
      chainId: 31337,
      verifyingContract: usdc,
    });
    const separator = await chainDriver(31337).client.readContract({
      address: usdc,
      abi: DOMAIN_SEPARATOR_ABI,
      functionName: "DOMAIN_SEPARATOR",
    });
    expect(domainSeparator({ domain: Option.getOrThrow(domain) })).toBe(separator);
    expect(Option.isSome(await reads((tokens) => tokens.permitDomain(chain, usdc)))).toBe(true);
  });

  it("a token with EIP-5267 declares it; a token with neither has none and takes no permit", async () => {
    const declared = await deploy(TestUSDCAbi, TestUSDCBytecode);
    const domain = await reads((tokens) => tokens.permitDomain(chain, declared));
    expect(Option.getOrUndefined(domain)).toMatchObject({
      name: "Test USD Coin",
      chainId: 31337,
      verifyingContract: getAddress(declared),
    });

    const plain = await deploy(NoReturnTokenAbi, NoReturnTokenBytecode);
    expect(Option.isNone(await reads((tokens) => tokens.domain(chain, plain)))).toBe(true);
    expect(Option.isNone(await reads((tokens) => tokens.permitDomain(chain, plain)))).toBe(true);
  });

  it("a chain that does not answer fails the read (no approve fallback on a network error)", async () => {
    // A chain of its own (clients are kept per chain id) whose node is not there.
    const down: ResolvedChain = {
      ...chain,
      id: 31_399,
      rpc: { http: [`http://127.0.0.1:${await freePort()}`] },
    };
    const usdc = chain.tokens[0]?.address as Hex;
    const failed = await runtime.runPromise(
      Effect.flip(Effect.flatMap(Effect.service(TokenReads), (tokens) => tokens.permitDomain(down, usdc))),
    );
    expect(failed._tag).toBe("ChainUnavailable");
  });
});
