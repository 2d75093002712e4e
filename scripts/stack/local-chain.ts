/**
 * Resolves a `local` chain of the chain config: deploys its test contracts on the running anvil
 * (once: a persisted chain keeps them, recorded in the deployments file) and fills in rpc and addresses.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createPublicClient, createWalletClient, defineChain, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { TestUSDCAbi, TestUSDCBytecode } from "../../abis/TestUSDC.ts";
import type { ChainConfig } from "../../service/chains/config.ts";
import type { RunningAnvil } from "./anvil.ts";

/** anvil's first default account: the local deployer and, later, the local relayer. Test use only. */
export const LOCAL_DEPLOYER_KEY: Hex = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

const CONTRACTS = { TestUSDC: { abi: TestUSDCAbi, bytecode: TestUSDCBytecode } } as const;

type Deployments = Record<string, Record<string, `0x${string}`>>;

const readDeployments = (file: string): Deployments =>
  existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Deployments) : {};

export const resolveLocalChain = async (
  chain: ChainConfig,
  anvil: RunningAnvil,
  deploymentsFile: string,
): Promise<ChainConfig> => {
  const viemChain = defineChain({
    id: chain.id,
    name: chain.name,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [anvil.http] } },
  });
  const account = privateKeyToAccount(LOCAL_DEPLOYER_KEY);
  const publicClient = createPublicClient({ chain: viemChain, transport: http(anvil.http) });
  const walletClient = createWalletClient({ chain: viemChain, account, transport: http(anvil.http) });
  const deployments = readDeployments(deploymentsFile);
  const known = deployments[String(chain.id)] ?? {};

  const deployed = async (name: keyof typeof CONTRACTS): Promise<`0x${string}`> => {
    const recorded = known[name];
    if (recorded) {
      const code = await publicClient.getCode({ address: recorded });
      if (code && code !== "0x") return recorded;
    }
    const hash = await walletClient.deployContract({
      abi: CONTRACTS[name].abi,
      bytecode: CONTRACTS[name].bytecode,
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (!receipt.contractAddress)
      throw new Error(`deploying ${name} on chain ${chain.id} produced no contract`);
    known[name] = receipt.contractAddress;
    return receipt.contractAddress;
  };

  const tokens = [];
  for (const token of chain.tokens) {
    tokens.push(token.deploy ? { ...token, address: await deployed(token.deploy) } : token);
  }
  writeFileSync(
    deploymentsFile,
    `${JSON.stringify({ ...deployments, [String(chain.id)]: known }, null, 2)}\n`,
  );
  return { ...chain, rpc: { http: [anvil.http], ws: anvil.ws }, tokens };
};
