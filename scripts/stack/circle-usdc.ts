/**
 * Circle's USDC deployed exactly as on mainnet, from Circle's published artifacts
 * (scripts/contracts/third-party.ts): the `SignatureChecker` library, `FiatTokenV2_2` linked to it and
 * initialised with throwaway values (as Circle's deploy script leaves the implementation), a
 * `FiatTokenProxy` in front of it handed to its own admin, a `MasterMinter`, then through the proxy
 * `initialize`, `initializeV2("USD Coin")`, `initializeV2_1` and `initializeV2_2`. Minters are
 * configured as Circle does: the master minter's owner names a controller for each minter, and the
 * controller sets the minter's allowance.
 */
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeDeployData,
  encodeFunctionData,
  type Hex,
  http,
  type PrivateKeyAccount,
  parseAbi,
  zeroAddress,
} from "viem";
import { circleArtifact, linked } from "../contracts/third-party.ts";

/** How a deployment reaches a chain: deploy creation code, or call and wait; both throw on a revert. */
export interface ChainWriter {
  readonly deploy: (from: PrivateKeyAccount, bytecode: Hex) => Promise<Hex>;
  readonly call: (from: PrivateKeyAccount, to: Hex, data: Hex) => Promise<void>;
}

/** A writer over plain JSON-RPC: each transaction sent from its account and waited for. */
export const rpcWriter = (rpcUrl: string, chainId: number): ChainWriter => {
  const chain = defineChain({
    id: chainId,
    name: `chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const transport = http(rpcUrl);
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  const mined = async (hash: Hex) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 60_000 });
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
    return receipt;
  };
  return {
    deploy: async (from, bytecode) => {
      const wallet = createWalletClient({ chain, transport, account: from });
      const receipt = await mined(await wallet.sendTransaction({ data: bytecode }));
      if (!receipt.contractAddress) throw new Error("the deployment created no contract");
      return receipt.contractAddress;
    },
    call: async (from, to, data) => {
      const wallet = createWalletClient({ chain, transport, account: from });
      await mined(await wallet.sendTransaction({ to, data }));
    },
  };
};

/** The token's roles as Circle assigns them on mainnet, played here by accounts the caller controls. */
export interface UsdcRoles {
  /** Deploys and initialises; holds no role afterwards. */
  readonly deployer: PrivateKeyAccount;
  /** The proxy's admin (may upgrade the implementation; may not use the token). */
  readonly proxyAdmin: Hex;
  /** Owner, pauser, blacklister, rescuer and the master minter's owner. */
  readonly circle: PrivateKeyAccount;
}

export interface CircleUsdc {
  /** The token's address: the proxy. */
  readonly address: Hex;
  readonly implementation: Hex;
  readonly masterMinter: Hex;
}

export const USDC_NAME = "USD Coin";
export const USDC_SYMBOL = "USDC";
export const USDC_DECIMALS = 6;
/** Where Circle's deploy script points the implementation's own roles. */
const THROWAWAY = "0x0000000000000000000000000000000000000001";

export const usdcAbi = parseAbi([
  "function initialize(string tokenName, string tokenSymbol, string tokenCurrency, uint8 tokenDecimals, address newMasterMinter, address newPauser, address newBlacklister, address newOwner)",
  "function initializeV2(string newName)",
  "function initializeV2_1(address lostAndFound)",
  "function initializeV2_2(address[] accountsToBlacklist, string newSymbol)",
  "function updateRescuer(address newRescuer)",
  "function mint(address to, uint256 amount) returns (bool)",
  "function blacklist(address account)",
  "function unBlacklist(address account)",
  "function isBlacklisted(address account) view returns (bool)",
  "function pause()",
  "function unpause()",
  "function paused() view returns (bool)",
  "function masterMinter() view returns (address)",
  "function isMinter(address account) view returns (bool)",
  "function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)",
  "function permit(address owner, address spender, uint256 value, uint256 deadline, bytes signature)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function receiveWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "function nonces(address owner) view returns (uint256)",
  "function name() view returns (string)",
  "function version() view returns (string)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
  "event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)",
]);
const proxyAbi = parseAbi(["function changeAdmin(address newAdmin)"]);
export const masterMinterAbi = parseAbi([
  "function configureController(address controller, address worker)",
  "function configureMinter(uint256 newAllowance)",
  "function transferOwnership(address newOwner)",
]);

const call = (functionName: string, args: readonly unknown[]) =>
  encodeFunctionData({ abi: usdcAbi, functionName, args } as Parameters<typeof encodeFunctionData>[0]);

export const deployCircleUsdc = async (writer: ChainWriter, roles: UsdcRoles): Promise<CircleUsdc> => {
  const { deployer, circle } = roles;
  const signatureChecker = await writer.deploy(deployer, circleArtifact("SignatureChecker").bytecode);
  const implementation = await writer.deploy(
    deployer,
    linked(circleArtifact("FiatTokenV2_2"), { SignatureChecker: signatureChecker }),
  );
  // The implementation itself is initialised with throwaway values, so nobody can take its roles.
  for (const data of [
    call("initialize", ["", "", "", 0, THROWAWAY, THROWAWAY, THROWAWAY, THROWAWAY]),
    call("initializeV2", [""]),
    call("initializeV2_1", [THROWAWAY]),
    call("initializeV2_2", [[], ""]),
  ])
    await writer.call(deployer, implementation, data);
  const proxyArtifact = circleArtifact("FiatTokenProxy");
  const address = await writer.deploy(
    deployer,
    encodeDeployData({ abi: proxyArtifact.abi, bytecode: proxyArtifact.bytecode, args: [implementation] }),
  );
  await writer.call(
    deployer,
    address,
    encodeFunctionData({ abi: proxyAbi, functionName: "changeAdmin", args: [roles.proxyAdmin] }),
  );
  const masterMinterArtifact = circleArtifact("MasterMinter");
  const masterMinter = await writer.deploy(
    deployer,
    encodeDeployData({
      abi: masterMinterArtifact.abi,
      bytecode: masterMinterArtifact.bytecode,
      args: [address],
    }),
  );
  await writer.call(
    deployer,
    masterMinter,
    encodeFunctionData({ abi: masterMinterAbi, functionName: "transferOwnership", args: [circle.address] }),
  );
  // Through the proxy, by an account that is not its admin (the admin cannot reach the token).
  for (const data of [
    call("initialize", [
      USDC_NAME,
      USDC_SYMBOL,
      "USD",
      USDC_DECIMALS,
      masterMinter,
      circle.address,
      circle.address,
      circle.address,
    ]),
    call("initializeV2", [USDC_NAME]),
    call("initializeV2_1", [circle.address]),
    call("initializeV2_2", [[], USDC_SYMBOL]),
  ])
    await writer.call(deployer, address, data);
  await writer.call(circle, address, call("updateRescuer", [circle.address]));
  return { address, implementation, masterMinter };
};

/**
 * Makes `minter` a minter of the token with `allowance`: the master minter's owner names `controller`
 * as the minter's controller, and the controller sets the allowance (a controller controls one minter).
 */
export const addUsdcMinter = async (
  writer: ChainWriter,
  usdc: Pick<CircleUsdc, "masterMinter">,
  circle: PrivateKeyAccount,
  controller: PrivateKeyAccount,
  minter: Hex,
  allowance: bigint,
): Promise<void> => {
  if (minter === zeroAddress) throw new Error("a minter needs an address");
  await writer.call(
    circle,
    usdc.masterMinter,
    encodeFunctionData({
      abi: masterMinterAbi,
      functionName: "configureController",
      args: [controller.address, minter],
    }),
  );
  await writer.call(
    controller,
    usdc.masterMinter,
    encodeFunctionData({ abi: masterMinterAbi, functionName: "configureMinter", args: [allowance] }),
  );
};
