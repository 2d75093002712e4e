/**
 * Resolves a `local` chain of the chain config: deploys its contracts on the running anvil (once: a
 * persisted chain keeps them, recorded in the deployments file) and fills in rpc and addresses. A token
 * with `"deploy": "FiatTokenV2_2"` is Circle's USDC deployed as on mainnet (circle-usdc.ts), its roles
 * played by anvil's accounts below; `"deploy": "TestUSDC"` is our own test token. Every local chain also
 * gets Safe 1.4.1 (the `Safe` singleton, `SafeProxyFactory`, `CompatibilityFallbackHandler`, from Safe's
 * published artifacts), and its factory is added to the resolved chain's `wallet_factories`, so Safe
 * customers, deployed or counterfactual (ERC-6492), work on `npm start` as on a real chain. The escrow
 * goes the way `npm run deploy` deploys it on a real chain (deterministic-deployment.ts): through the
 * CREATE2 proxy, at the same address on every chain.
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
  maxUint256,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi, MandateEscrowBytecode } from "../../abis/MandateEscrow.ts";
import { TestUSDCAbi, TestUSDCBytecode } from "../../abis/TestUSDC.ts";
import type { ChainConfig } from "../../service/chains/config.ts";
import {
  BILLING_CONTRACTS,
  deployDeterministic,
  deploymentBlock,
  deterministicAddress,
  ESCROW_CONTRACT,
  ensureCreate2Proxy,
} from "../contracts/deterministic-deployment.ts";
import { circleArtifact, safeArtifact } from "../contracts/third-party.ts";
import { type RunningAnvil, rpc } from "./anvil.ts";
import { addUsdcMinter, deployCircleUsdc, rpcWriter, usdcAbi } from "./circle-usdc.ts";

/** anvil's first default account: the local deployer. Test use only. */
export const LOCAL_DEPLOYER_KEY: Hex = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
/**
 * anvil's third default account: the local relayer, which operates mandates and pays their gas. An
 * account of its own, so its nonces never race the deployer's or a test's transactions. Test use only.
 */
export const LOCAL_RELAYER_KEY: Hex = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

/**
 * anvil's seventh default account: the operator `config/chains.json` names, as an operator's cold key
 * or Safe would be on a real chain. Its mandates are charged by the relayer it names (the stack names
 * it at every start); with its key a newcomer can rotate the relayer (docs/operations.md). Test use only.
 */
export const LOCAL_OPERATOR_KEY: Hex = "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e";

/** anvil's eighth default account: the local USDC's test faucet, a minter of its own. Test use only. */
export const LOCAL_FAUCET_KEY: Hex = "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356";
/** anvil's ninth default account: the local USDC proxy's admin (which cannot use the token). */
const LOCAL_USDC_PROXY_ADMIN: Hex = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f";
/**
 * anvil's tenth default account: Circle on the local chain, the USDC's owner, pauser, blacklister,
 * rescuer and master minter's owner. Tests blacklist and pause with it. Test use only.
 */
export const LOCAL_USDC_ADMIN_KEY: Hex = "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6";

const CONTRACTS = {
  TestUSDC: { abi: TestUSDCAbi, bytecode: TestUSDCBytecode },
} as const;

/** Safe 1.4.1's contracts a Safe needs, deployed on every local chain under these names. */
const SAFE_CONTRACTS = ["Safe", "SafeProxyFactory", "CompatibilityFallbackHandler"] as const;
type SafeContract = (typeof SAFE_CONTRACTS)[number];
type ContractName = keyof typeof CONTRACTS | SafeContract;

const contractCode = (name: ContractName) => (name === "TestUSDC" ? CONTRACTS[name] : safeArtifact(name));

/** Where a local chain's Safe 1.4.1 is. */
export interface LocalSafe {
  readonly singleton: Hex;
  readonly factory: Hex;
  readonly fallbackHandler: Hex;
}

interface Deployment {
  readonly address: `0x${string}`;
  readonly block: number;
  readonly codeHash: `0x${string}`;
}
type Deployments = Record<string, Record<string, Deployment>>;

const readDeployments = (file: string): Deployments =>
  existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Deployments) : {};

/** The Safe 1.4.1 that `resolveLocalChain` deployed on a chain, from its deployments file. */
export const localSafe = (deploymentsFile: string, chainId: number): LocalSafe => {
  const known = readDeployments(deploymentsFile)[String(chainId)] ?? {};
  const address = (name: SafeContract) => {
    const deployment = known[name];
    if (deployment === undefined) throw new Error(`no ${name} deployed on chain ${chainId}`);
    return deployment.address;
  };
  return {
    singleton: address("Safe"),
    factory: address("SafeProxyFactory"),
    fallbackHandler: address("CompatibilityFallbackHandler"),
  };
};

/**
 * What the local chain's USDC is identified by in the deployments file: its implementation's and its
 * proxy's code (another build of either is deployed afresh).
 */
const usdcCodeHash = () =>
  keccak256(
    `0x${circleArtifact("FiatTokenV2_2").bytecode.slice(2)}${circleArtifact("FiatTokenProxy").bytecode.slice(2)}`,
  );

/**
 * @param relayer the service's relayer on this chain: a USDC minter besides the test faucet, so that the
 * test-mode fund helpers mint through the relayer as they would on any chain whose token lets them.
 */
export const resolveLocalChain = async (
  chain: ChainConfig,
  anvil: RunningAnvil,
  deploymentsFile: string,
  relayer: Hex = privateKeyToAccount(LOCAL_RELAYER_KEY).address,
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
  const deployed = async (name: ContractName): Promise<Deployment> => {
    const { abi, bytecode } = contractCode(name);
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

  /** The escrow (and its collector) as `npm run deploy` deploys them: through the CREATE2 proxy. */
  const deployedEscrow = async (): Promise<Deployment> => {
    const recorded = known.MandateEscrow;
    // A chain kept in .data from before the escrow went through the proxy keeps the escrow its records
    // name (`npm run reset` starts it over on the proxy's address).
    if (
      recorded?.codeHash === keccak256(MandateEscrowBytecode) &&
      recorded.address.toLowerCase() !== deterministicAddress(ESCROW_CONTRACT).toLowerCase()
    ) {
      const code = await publicClient.getCode({ address: recorded.address });
      if (code !== undefined && code !== "0x") return recorded;
    }
    await ensureCreate2Proxy(publicClient, walletClient);
    const [escrow] = await deployDeterministic(publicClient, walletClient, BILLING_CONTRACTS);
    if (escrow === undefined) throw new Error("no escrow among the contracts to deploy");
    const block =
      escrow.block ??
      (recorded?.address.toLowerCase() === escrow.address.toLowerCase()
        ? BigInt(recorded.block)
        : undefined) ??
      (await deploymentBlock(publicClient, escrow.address));
    if (block === undefined) throw new Error(`cannot find the block of the escrow at ${escrow.address}`);
    const deployment = {
      address: getAddress(escrow.address),
      block: Number(block),
      codeHash: keccak256(MandateEscrowBytecode),
    };
    known.MandateEscrow = deployment;
    return deployment;
  };

  /** Circle's USDC, once per chain, with the relayer and the test faucet as minters. */
  const circleUsdc = async (): Promise<Deployment> => {
    const codeHash = usdcCodeHash();
    const recorded = known.FiatTokenV2_2;
    let deployment: Deployment;
    let masterMinter: Hex;
    const code =
      recorded?.codeHash === codeHash ? await publicClient.getCode({ address: recorded.address }) : undefined;
    if (recorded !== undefined && code !== undefined && code !== "0x") {
      deployment = recorded;
      masterMinter = await publicClient.readContract({
        address: recorded.address,
        abi: usdcAbi,
        functionName: "masterMinter",
      });
    } else {
      const writer = rpcWriter(anvil.http, chain.id);
      const usdc = await deployCircleUsdc(writer, {
        deployer: account,
        proxyAdmin: LOCAL_USDC_PROXY_ADMIN,
        circle: privateKeyToAccount(LOCAL_USDC_ADMIN_KEY),
      });
      const block = Number(await publicClient.getBlockNumber());
      deployment = { address: getAddress(usdc.address), block, codeHash };
      masterMinter = usdc.masterMinter;
      known.FiatTokenV2_2 = deployment;
    }
    const circle = privateKeyToAccount(LOCAL_USDC_ADMIN_KEY);
    const faucet = privateKeyToAccount(LOCAL_FAUCET_KEY);
    // The relayer may differ between starts (RELAYER_PRIVATE_KEY); each start makes sure it mints.
    for (const [controller, minter] of [
      [faucet, faucet.address],
      [circle, relayer],
    ] as const) {
      const minting = await publicClient.readContract({
        address: deployment.address,
        abi: usdcAbi,
        functionName: "isMinter",
        args: [minter],
      });
      if (!minting)
        await addUsdcMinter(
          rpcWriter(anvil.http, chain.id),
          { masterMinter },
          circle,
          controller,
          minter,
          maxUint256,
        );
    }
    return deployment;
  };

  const tokens = [];
  for (const token of chain.tokens) {
    if (token.deploy === undefined) tokens.push(token);
    else
      tokens.push({
        ...token,
        address: (token.deploy === "FiatTokenV2_2" ? await circleUsdc() : await deployed(token.deploy))
          .address,
      });
  }
  let escrow = chain.escrow;
  if (escrow.address === undefined) {
    const deployment = await deployedEscrow();
    escrow = { address: deployment.address, start_block: deployment.block };
  }
  // One after another: each deployment takes the deployer's next nonce.
  for (const name of SAFE_CONTRACTS) await deployed(name);
  // A relayer other than anvil's own accounts (RELAYER_PRIVATE_KEY) starts with nothing to pay gas with.
  if ((await publicClient.getBalance({ address: relayer })) === 0n)
    await rpc(anvil.http, "anvil_setBalance", [relayer, `0x${(10n ** 22n).toString(16)}`]);
  if (chain.operator !== undefined && escrow.address !== undefined)
    await nameRelayer(publicClient, anvil.http, escrow.address as Hex, getAddress(chain.operator), relayer);
  const safeFactory = known.SafeProxyFactory?.address;
  const walletFactories = [...(chain.wallet_factories ?? [])];
  if (safeFactory && !walletFactories.some((f) => f.toLowerCase() === safeFactory.toLowerCase()))
    walletFactories.push(safeFactory);
  writeFileSync(
    deploymentsFile,
    `${JSON.stringify({ ...deployments, [String(chain.id)]: known }, null, 2)}\n`,
  );
  // The local node's URLs replace any configured ones; a configured batch size still applies.
  return {
    ...chain,
    rpc: { ...chain.rpc, http: [anvil.http], ws: anvil.ws },
    tokens,
    escrow,
    wallet_factories: walletFactories,
  };
};

/**
 * The chain's operator names the relayer on the escrow (`setRelayer`), unless it has already: anvil
 * lets the stack send as any address, as the operator's owner would sign on a real chain.
 */
const nameRelayer = async (
  publicClient: ReturnType<typeof createPublicClient>,
  rpcUrl: string,
  escrow: Hex,
  operator: Hex,
  relayer: Hex,
) => {
  const read = { address: escrow, abi: MandateEscrowAbi } as const;
  if (await publicClient.readContract({ ...read, functionName: "isRelayer", args: [operator, relayer] }))
    return;
  await rpc(rpcUrl, "anvil_impersonateAccount", [operator]);
  try {
    if ((await publicClient.getBalance({ address: operator })) === 0n)
      await rpc(rpcUrl, "anvil_setBalance", [operator, `0x${(10n ** 18n).toString(16)}`]);
    const hash = await createWalletClient({ account: operator, transport: http(rpcUrl) }).writeContract({
      ...read,
      chain: null,
      functionName: "setRelayer",
      args: [relayer, true],
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    if (receipt.status !== "success") throw new Error(`setRelayer(${relayer}) by ${operator} reverted`);
  } finally {
    await rpc(rpcUrl, "anvil_stopImpersonatingAccount", [operator]);
  }
};

/**
 * Makes `minter` (a benchmark's faucet contract, say) a minter of a local chain's USDC, with the
 * stack's master minter owner as its controller. Test use only.
 */
export const addLocalUsdcMinter = async (rpcUrl: string, chainId: number, usdc: Hex, minter: Hex) => {
  const publicClient = createPublicClient({ transport: http(rpcUrl) });
  const masterMinter = await publicClient.readContract({
    address: usdc,
    abi: usdcAbi,
    functionName: "masterMinter",
  });
  const circle = privateKeyToAccount(LOCAL_USDC_ADMIN_KEY);
  await addUsdcMinter(rpcWriter(rpcUrl, chainId), { masterMinter }, circle, circle, minter, maxUint256);
};
