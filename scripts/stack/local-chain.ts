/**
 * Resolves a `local` chain of the chain config: deploys its test contracts on the running anvil
 * (once: a persisted chain keeps them, recorded in the deployments file) and fills in rpc and addresses.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http,
  keccak256,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi, MandateEscrowBytecode } from "../../abis/MandateEscrow.ts";
import { TestUSDCAbi, TestUSDCBytecode } from "../../abis/TestUSDC.ts";
import type { ChainConfig } from "../../service/chains/config.ts";
import type { RunningAnvil } from "./anvil.ts";

/** anvil's first default account: the local deployer. Test use only. */
export const LOCAL_DEPLOYER_KEY: Hex = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
/**
 * anvil's third default account: the local relayer, which operates mandates and pays their gas. An
 * account of its own, so its nonces never race the deployer's or a test's transactions. Test use only.
 */
export const LOCAL_RELAYER_KEY: Hex = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

const CONTRACTS = {
  TestUSDC: { abi: TestUSDCAbi, bytecode: TestUSDCBytecode },
  MandateEscrow: { abi: MandateEscrowAbi, bytecode: MandateEscrowBytecode },
} as const;

interface Deployment {
  readonly address: `0x${string}`;
  readonly block: number;
  readonly codeHash: `0x${string}`;
}
type Deployments = Record<string, Record<string, Deployment>>;

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

  /** Deploys a contract once per chain; a changed contract (other bytecode) is deployed afresh. */
  const deployed = async (name: keyof typeof CONTRACTS): Promise<Deployment> => {
    const { abi, bytecode } = CONTRACTS[name];
    const codeHash = keccak256(bytecode);
    const recorded = known[name];
    if (recorded?.codeHash === codeHash) {
      const code = await publicClient.getCode({ address: recorded.address });
      if (code && code !== "0x") return recorded;
    }
    const hash = await walletClient.deployContract({ abi, bytecode });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (!receipt.contractAddress)
      throw new Error(`deploying ${name} on chain ${chain.id} produced no contract`);
    const deployment = {
      address: getAddress(receipt.contractAddress),
      block: Number(receipt.blockNumber),
      codeHash,
    };
    known[name] = deployment;
    return deployment;
  };

  const tokens = [];
  for (const token of chain.tokens) {
    tokens.push(token.deploy ? { ...token, address: (await deployed(token.deploy)).address } : token);
  }
  let escrow = chain.escrow;
  if (escrow.address === undefined) {
    const deployment = await deployed("MandateEscrow");
    escrow = { address: deployment.address, start_block: deployment.block };
  }
  writeFileSync(
    deploymentsFile,
    `${JSON.stringify({ ...deployments, [String(chain.id)]: known }, null, 2)}\n`,
  );
  // The local node's URLs replace any configured ones; a configured batch size still applies.
  return { ...chain, rpc: { ...chain.rpc, http: [anvil.http], ws: anvil.ws }, tokens, escrow };
};
