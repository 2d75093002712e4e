/**
 * Safe 1.4.1 customers on the stack's local chain, made and used as Safe{Wallet} makes and uses them:
 * a `SafeProxy` from the stack's `SafeProxyFactory` (`createProxyWithNonce`) whose `setup` names the
 * owners, the threshold and the `CompatibilityFallbackHandler`, deployed or only counterfactual.
 *
 * A Safe answers a dapp's `eth_signTypedData_v4` as Safe{Wallet} does: each owner signs the Safe's
 * EIP-712 `SafeMessage` whose `message` is the typed data's EIP-712 hash, in the Safe's own domain
 * (`chainId`, `verifyingContract`); the owners' signatures are concatenated in ascending order of their
 * addresses. That is exactly what the fallback handler's `isValidSignature(bytes32,bytes)` checks
 * (`getMessageHashForSafe`, then the Safe's `checkSignatures`). A Safe not deployed yet wraps it in
 * ERC-6492 (`abi.encode(factory, factoryCalldata, signature) ++ 0x6492…6492`).
 */
import { join } from "node:path";
import {
  concat,
  createWalletClient,
  encodeFunctionData,
  type Hex,
  hashTypedData,
  http,
  type PrivateKeyAccount,
  parseAbi,
  serializeErc6492Signature,
  type TypedDataDefinition,
  zeroAddress,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { safeArtifact } from "../../scripts/contracts/third-party.ts";
import { localSafe } from "../../scripts/stack/local-chain.ts";
import type { chainDriver } from "./chain-driver.ts";
import { stack } from "./helpers.ts";

export const safeAbi = parseAbi([
  "function setup(address[] owners, uint256 threshold, address to, bytes data, address fallbackHandler, address paymentToken, uint256 payment, address paymentReceiver)",
  "function execTransaction(address to, uint256 value, bytes data, uint8 operation, uint256 safeTxGas, uint256 baseGas, uint256 gasPrice, address gasToken, address refundReceiver, bytes signatures) payable returns (bool)",
  "function swapOwner(address prevOwner, address oldOwner, address newOwner)",
  "function getOwners() view returns (address[])",
  "function getThreshold() view returns (uint256)",
  "function nonce() view returns (uint256)",
  "function VERSION() view returns (string)",
  "function isValidSignature(bytes32 hash, bytes signature) view returns (bytes4)",
]);
export const safeFactoryAbi = parseAbi([
  "function createProxyWithNonce(address singleton, bytes initializer, uint256 saltNonce) returns (address proxy)",
]);
/** Safe's owner list starts at this sentinel: the "previous owner" of the first owner. */
const SENTINEL_OWNERS = "0x0000000000000000000000000000000000000001";

const SAFE_MESSAGE_TYPES = { SafeMessage: [{ name: "message", type: "bytes" }] } as const;
const SAFE_TX_TYPES = {
  SafeTx: [
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "data", type: "bytes" },
    { name: "operation", type: "uint8" },
    { name: "safeTxGas", type: "uint256" },
    { name: "baseGas", type: "uint256" },
    { name: "gasPrice", type: "uint256" },
    { name: "gasToken", type: "address" },
    { name: "refundReceiver", type: "address" },
    { name: "nonce", type: "uint256" },
  ],
} as const;

export interface SafeWallet {
  readonly address: Hex;
  /** Its current owners (the test changes them through `swapOwner`). */
  owners: PrivateKeyAccount[];
  readonly threshold: number;
  /** The factory call that deploys it, as its ERC-6492 wrapper names it. */
  readonly deployment: { readonly factory: Hex; readonly data: Hex };
}

/** Safe 1.4.1 on one of the stack's local chains. */
export const safesOn = (driver: ReturnType<typeof chainDriver>) => {
  const contracts = localSafe(join(stack().dataDir, "deployments.json"), driver.resolved.id);
  const chainId = driver.resolved.id;

  /** A funded throwaway account that sends what the test needs sent: the Safe's owners hold no gas. */
  const sender = async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    await driver.rpc("anvil_setBalance", [account.address, "0xde0b6b3a7640000"]);
    return createWalletClient({
      chain: driver.client.chain,
      transport: http(driver.resolved.rpc.http[0]),
      account,
    });
  };
  const sendAndWait = async (to: Hex, data: Hex) => {
    const wallet = await sender();
    const hash = await wallet.sendTransaction({ to, data, gas: 1_000_000n });
    const receipt = await driver.client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
    return receipt;
  };

  /**
   * A Safe of `owners` (threshold `threshold`), not deployed: its address is what the factory's
   * `createProxyWithNonce` returns for the same call (simulated).
   */
  const counterfactual = async (
    owners: PrivateKeyAccount[],
    threshold = 1,
    factory: Hex = contracts.factory,
  ): Promise<SafeWallet> => {
    const initializer = encodeFunctionData({
      abi: safeAbi,
      functionName: "setup",
      args: [
        owners.map((o) => o.address),
        BigInt(threshold),
        zeroAddress,
        "0x",
        contracts.fallbackHandler,
        zeroAddress,
        0n,
        zeroAddress,
      ],
    });
    const saltNonce = BigInt(generatePrivateKey());
    const args = [contracts.singleton, initializer, saltNonce] as const;
    const { result } = await driver.client.simulateContract({
      address: factory,
      abi: safeFactoryAbi,
      functionName: "createProxyWithNonce",
      args,
    });
    const data = encodeFunctionData({ abi: safeFactoryAbi, functionName: "createProxyWithNonce", args });
    return { address: result, owners: [...owners], threshold, deployment: { factory, data } };
  };

  /** Deploys a counterfactual Safe (sent by a throwaway account); returns the receipt. */
  const deploy = (safe: SafeWallet) => sendAndWait(safe.deployment.factory, safe.deployment.data);

  /** A deployed Safe of `owners`. */
  const deployed = async (owners: PrivateKeyAccount[], threshold = 1) => {
    const safe = await counterfactual(owners, threshold);
    await deploy(safe);
    return safe;
  };

  /** The owners' signatures of an EIP-712 hash as the Safe checks them: ascending owner order, concatenated. */
  const ownerSignatures = async (
    owners: PrivateKeyAccount[],
    sign: (owner: PrivateKeyAccount) => Promise<Hex>,
  ): Promise<Hex> => {
    const sorted = [...owners].sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1));
    return concat(await Promise.all(sorted.map(sign)));
  };

  /**
   * Signs typed data for the Safe as Safe{Wallet} answers `eth_signTypedData_v4`: `signers` (default: its
   * current owners, as many as the threshold) each sign the `SafeMessage` of the typed data's hash.
   * `erc6492` wraps the result for a Safe not deployed yet.
   */
  const signTypedData = async (
    safe: SafeWallet,
    typedData: TypedDataDefinition,
    options: { readonly signers?: PrivateKeyAccount[]; readonly erc6492?: boolean } = {},
  ): Promise<Hex> => {
    const hash = hashTypedData(typedData);
    const signers = options.signers ?? safe.owners.slice(0, safe.threshold);
    const signature = await ownerSignatures(signers, (owner) =>
      owner.signTypedData({
        domain: { chainId, verifyingContract: safe.address },
        types: SAFE_MESSAGE_TYPES,
        primaryType: "SafeMessage",
        message: { message: hash },
      }),
    );
    return options.erc6492
      ? serializeErc6492Signature({
          address: safe.deployment.factory,
          data: safe.deployment.data,
          signature,
        })
      : signature;
  };

  /** The Safe as the signer `signPageTerms` and the pay page tests take (an address and a signTypedData). */
  const signer = (
    safe: SafeWallet,
    options: { readonly signers?: PrivateKeyAccount[]; readonly erc6492?: boolean } = {},
  ) => ({
    address: safe.address,
    signTypedData: (typedData: TypedDataDefinition) => signTypedData(safe, typedData, options),
  });

  /**
   * Executes a Safe transaction (a call from the Safe) signed by its owners, as Safe{Wallet} does, sent by
   * a throwaway account: the Safe and its owners pay no gas.
   */
  const execute = async (safe: SafeWallet, to: Hex, data: Hex) => {
    const nonce = await driver.client.readContract({
      address: safe.address,
      abi: safeAbi,
      functionName: "nonce",
    });
    const tx = {
      to,
      value: 0n,
      data,
      operation: 0,
      safeTxGas: 0n,
      baseGas: 0n,
      gasPrice: 0n,
      gasToken: zeroAddress,
      refundReceiver: zeroAddress,
      nonce,
    } as const;
    const signatures = await ownerSignatures(safe.owners.slice(0, safe.threshold), (owner) =>
      owner.signTypedData({
        domain: { chainId, verifyingContract: safe.address },
        types: SAFE_TX_TYPES,
        primaryType: "SafeTx",
        message: tx,
      }),
    );
    return sendAndWait(
      safe.address,
      encodeFunctionData({
        abi: safeAbi,
        functionName: "execTransaction",
        args: [to, 0n, data, 0, 0n, 0n, 0n, zeroAddress, zeroAddress, signatures],
      }),
    );
  };

  /** Replaces a one-owner Safe's owner (a Safe transaction the current owner signs). */
  const swapOwner = async (safe: SafeWallet, next: PrivateKeyAccount) => {
    const [current] = safe.owners;
    if (current === undefined || safe.owners.length !== 1)
      throw new Error("swapOwner takes a one-owner Safe");
    await execute(
      safe,
      safe.address,
      encodeFunctionData({
        abi: safeAbi,
        functionName: "swapOwner",
        args: [SENTINEL_OWNERS, current.address, next.address],
      }),
    );
    safe.owners = [next];
  };

  /** Another SafeProxyFactory, deployed by a throwaway account: the same code, not on the chain's allowlist. */
  const strangerFactory = async () => {
    const receipt = await (async () => {
      const wallet = await sender();
      const hash = await wallet.sendTransaction({ data: safeArtifact("SafeProxyFactory").bytecode });
      return driver.client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    })();
    if (!receipt.contractAddress) throw new Error("the factory was not deployed");
    return receipt.contractAddress;
  };

  return {
    contracts,
    counterfactual,
    deploy,
    deployed,
    signTypedData,
    signer,
    execute,
    swapOwner,
    strangerFactory,
  };
};
