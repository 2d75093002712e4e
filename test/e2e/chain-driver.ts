/**
 * Drives the stack's local chains the way a customer's wallet and the relayer would: mint, approve,
 * sign and submit mandates, charge, release, return, move time, reorganise blocks.
 */
import { readFileSync } from "node:fs";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  type PrivateKeyAccount,
  parseEventLogs,
  parseUnits,
  type TransactionReceipt,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { TestUSDCBytecode } from "../../abis/TestUSDC.ts";
import { type RunningAnvil, rpc } from "../../scripts/stack/anvil.ts";
import { usdcAbi } from "../../scripts/stack/circle-usdc.ts";
import {
  LOCAL_DEPLOYER_KEY,
  LOCAL_FAUCET_KEY,
  LOCAL_USDC_ADMIN_KEY,
} from "../../scripts/stack/local-chain.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { mandateIdFor, TERMS_TYPES } from "../contract/harness.ts";
import { stack } from "./helpers.ts";

/** The relayer in these tests: anvil's first account (the local deployer). */
export const operator = privateKeyToAccount(LOCAL_DEPLOYER_KEY);
/** The dev merchant's payout address on every local test chain (set by the stack's seed). */
export const DEV_PAYOUT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" as const;
export const usd = (amount: string) => parseUnits(amount, 6);
/** The local USDC's test faucet: a minter of its own (local-chain.ts). */
export const faucet = privateKeyToAccount(LOCAL_FAUCET_KEY);
/** Circle on the local chains: the USDC's owner, pauser and blacklister (local-chain.ts). */
export const circle = privateKeyToAccount(LOCAL_USDC_ADMIN_KEY);
/** The faucet's transactions, one at a time per chain (each takes the account's next nonce). */
const faucetQueues = new Map<number, Promise<unknown>>();

/** The chain's driver, on the shared stack or on the one whose resolved chains file is `chainsFile`. */
export const chainDriver = (chainId: number, chainsFile: string = stack().chainsFile) => {
  const resolved = (JSON.parse(readFileSync(chainsFile, "utf8")) as { chains: ResolvedChain[] }).chains.find(
    (c) => c.id === chainId,
  );
  if (!resolved) throw new Error(`no chain ${chainId} in the stack`);
  const chain = defineChain({
    id: chainId,
    name: resolved.name,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [...resolved.rpc.http] } },
  });
  const transport = http(resolved.rpc.http[0]);
  const client = createPublicClient({ chain, transport, pollingInterval: 20 });
  const escrow = resolved.escrow.address;
  const usdc = (resolved.tokens[0] as { address: `0x${string}` }).address;
  const rpc = (method: string, params: unknown[]) => client.request({ method, params } as never);

  /** Signs locally and sends raw, returning the raw bytes too (a reorg can re-include them). */
  const send = async (
    account: PrivateKeyAccount,
    to: `0x${string}`,
    data: Hex,
    attemptsLeft = 2,
  ): Promise<{ hash: Hex; raw: Hex; receipt: TransactionReceipt }> => {
    const wallet = createWalletClient({ chain, transport, account });
    const request = await wallet.prepareTransactionRequest({ to, data, gas: 1_000_000n });
    const raw = await wallet.signTransaction(request);
    const minedNonce = () => client.getTransactionCount({ address: account.address }).catch(() => undefined);
    /**
     * The test files share the chain and the faucet's account, each with a queue of its own: another
     * file's transaction can take this nonce (seen in CI: the account's nonce past ours, ours in no
     * block and no pool). Then this one is signed again with the next nonce.
     */
    const taken = async (hash?: Hex) =>
      attemptsLeft > 0 &&
      ((await minedNonce()) ?? 0) > request.nonce &&
      (hash === undefined ||
        (await client.getTransaction({ hash }).then(
          () => false,
          () => true,
        )));
    const hash = await client
      .sendRawTransaction({ serializedTransaction: raw })
      .catch(async (error: unknown) => {
        if (await taken()) return undefined;
        throw error;
      });
    if (hash === undefined) return send(account, to, data, attemptsLeft - 1);
    // Bounded well inside a test's time: a transaction never mined fails naming its hash, not the test's timeout.
    const waitFor = (timeout: number) =>
      client.waitForTransactionReceipt({ hash, pollingInterval: 20, timeout }).catch(() => undefined);
    const receipt = (await waitFor(10_000)) ?? ((await taken(hash)) ? "taken" : await waitFor(20_000));
    if (receipt === "taken") return send(account, to, data, attemptsLeft - 1);
    if (receipt === undefined) {
      const [automine, pool, head, nonce] = await Promise.all([
        rpc("anvil_getAutomine", []).catch(() => "?"),
        rpc("txpool_inspect", []).catch(() => "?"),
        client.getBlock().catch(() => undefined),
        minedNonce(),
      ]);
      throw new Error(
        `transaction ${hash} not mined in 30 s: sent from ${account.address} with nonce ${request.nonce}, max fee ${request.maxFeePerGas}; the chain: automine ${String(automine)}, head ${head?.number} base fee ${head?.baseFeePerGas}, the account's mined nonce ${nonce}, pool ${JSON.stringify(pool).slice(0, 2000)}`,
      );
    }
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
    return { hash, raw, receipt };
  };
  /**
   * Signs and sends without waiting for a block (for automine off), with a tip above the relayer's so
   * that the next block mines it first; returns its hash.
   */
  const sendAhead = async (account: PrivateKeyAccount, to: `0x${string}`, data: Hex) => {
    const wallet = createWalletClient({ chain, transport, account });
    const request = await wallet.prepareTransactionRequest({
      to,
      data,
      gas: 1_000_000n,
      maxPriorityFeePerGas: 16_000_000_000n,
      maxFeePerGas: 160_000_000_000n,
    });
    return client.sendRawTransaction({ serializedTransaction: await wallet.signTransaction(request) });
  };
  const call = (
    account: PrivateKeyAccount,
    to: `0x${string}`,
    abi: typeof MandateEscrowAbi | typeof erc20Abi | typeof usdcAbi,
    functionName: string,
    args: unknown[],
  ) =>
    send(
      account,
      to,
      encodeFunctionData({ abi, functionName, args } as Parameters<typeof encodeFunctionData>[0]),
    );

  /** Mints the chain's USDC to `to` from the test faucet. */
  const mint = (to: Hex, amount: bigint) => {
    const minted = (faucetQueues.get(chainId) ?? Promise.resolve()).then(() =>
      call(faucet, usdc, usdcAbi, "mint", [to, amount]),
    );
    faucetQueues.set(
      chainId,
      minted.catch(() => undefined),
    );
    return minted;
  };

  /** A fresh account with ether for gas and nothing else (anyone may release a hold that is over). */
  const newStranger = async () => {
    const stranger = privateKeyToAccount(generatePrivateKey());
    await rpc("anvil_setBalance", [stranger.address, "0xde0b6b3a7640000"]);
    return stranger;
  };

  /**
   * A customer with gas and `funds`, who approved the escrow for everything unless `approve` is false
   * (the page then asks that customer for a permit).
   */
  const newCustomer = async (funds = usd("1000"), options: { readonly approve?: boolean } = {}) => {
    const customer = privateKeyToAccount(generatePrivateKey());
    await rpc("anvil_setBalance", [customer.address, "0xde0b6b3a7640000"]);
    await mint(customer.address, funds);
    if (options.approve !== false) await call(customer, usdc, erc20Abi, "approve", [escrow, 2n ** 256n - 1n]);
    return customer;
  };

  const latestTime = async () => Number((await client.getBlock()).timestamp);
  /** The chain's USDC moved by a transaction, read from its receipt's `Transfer` logs (not our tables). */
  const usdcTransfers = async (hash: Hex) =>
    parseEventLogs({
      abi: erc20Abi,
      eventName: "Transfer",
      logs: (await client.getTransactionReceipt({ hash })).logs.filter(
        (log) => log.address.toLowerCase() === usdc.toLowerCase(),
      ),
    }).map((log) => ({
      from: log.args.from.toLowerCase() as Hex,
      to: log.args.to.toLowerCase() as Hex,
      value: log.args.value,
    }));
  /** The test token's balance of an address. */
  const balanceOf = (address: Hex) =>
    client.readContract({ address: usdc, abi: erc20Abi, functionName: "balanceOf", args: [address] });

  const authorize = async (
    customer: PrivateKeyAccount,
    options: {
      cap?: bigint;
      periods?: number;
      holdSeconds?: number;
      payee?: `0x${string}`;
      operator?: `0x${string}`;
      salt?: bigint;
    } = {},
  ) => {
    const now = await latestTime();
    const terms = {
      mandateId: mandateIdFor(customer.address, options.salt ?? BigInt(Date.now())),
      payee: options.payee ?? DEV_PAYOUT,
      token: usdc,
      cap: options.cap ?? usd("50"),
      anchor: BigInt(now),
      approvalPeriods: options.periods ?? 12,
      operator: options.operator ?? operator.address,
      holdSeconds: BigInt(options.holdSeconds ?? 0),
      nonce: 1n,
      deadline: BigInt(now + 3600),
    };
    const signature = await customer.signTypedData({
      domain: { name: "MandateEscrow", version: "1", chainId, verifyingContract: escrow },
      types: TERMS_TYPES,
      primaryType: "Terms",
      message: terms,
    });
    const tx = await call(operator, escrow, MandateEscrowAbi, "authorize", [terms, signature]);
    return { terms, mandateId: terms.mandateId.toLowerCase() as Hex, tx };
  };

  return {
    resolved,
    client,
    escrow,
    usdc,
    rpc,
    /** The latest block's time (chain seconds). */
    latestTime,
    /** Any account's call of a contract, mined and checked (reverted: an error). */
    call,
    mint,
    sendAhead,
    newStranger,
    newCustomer,
    balanceOf,
    usdcTransfers,
    authorize,
    charge: (mandateId: Hex, amount: bigint) =>
      call(operator, escrow, MandateEscrowAbi, "charge", [mandateId, amount]),
    release: (mandateId: Hex, period: number) =>
      call(operator, escrow, MandateEscrowAbi, "release", [mandateId, period]),
    returnCharge: (mandateId: Hex, period: number) =>
      call(operator, escrow, MandateEscrowAbi, "returnCharge", [mandateId, period]),
    /** What Circle can do to the local USDC: blacklist an address, pause every transfer. */
    issuer: {
      blacklist: (address: Hex) => call(circle, usdc, usdcAbi, "blacklist", [address]),
      unBlacklist: (address: Hex) => call(circle, usdc, usdcAbi, "unBlacklist", [address]),
      pause: () => call(circle, usdc, usdcAbi, "pause", []),
      unpause: () => call(circle, usdc, usdcAbi, "unpause", []),
    },
    mine: (blocks = 1) => rpc("anvil_mine", [`0x${blocks.toString(16)}`]),
    increaseTime: (seconds: number) => rpc("evm_increaseTime", [`0x${seconds.toString(16)}`]),
    /**
     * A signed, unsent transfer of nothing from Circle's account to itself. Re-included with a reorged
     * transaction, it makes the new block differ from the one it replaces: the same transactions in a block
     * mined within the same second would give the same block, and no reorg at all.
     */
    distinctTransaction: async () => {
      const wallet = createWalletClient({ chain, transport, account: circle });
      const request = await wallet.prepareTransactionRequest({ to: circle.address, value: 0n, gas: 21_000n });
      return wallet.signTransaction(request);
    },
    /** Replaces the last `depth` blocks; `raws` are re-included in the first new block. */
    reorg: (depth: number, raws: Hex[] = []) => rpc("anvil_reorg", [depth, raws.map((raw) => [raw, 0])]),
  };
};

/**
 * Deploys the test USDC on an anvil of a test's own by a plain RPC request from anvil's first
 * (unlocked) account; returns its address.
 */
export const deployTestUsdc = async (anvil: RunningAnvil): Promise<Hex> => {
  const deployHash = (await rpc(anvil.http, "eth_sendTransaction", [
    { from: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", data: TestUSDCBytecode, gas: "0x4c4b40" },
  ])) as Hex;
  // Automining anvil may answer the receipt a moment after the hash.
  let address: Hex | undefined;
  await waitFor(
    async () => {
      const receipt = (await rpc(anvil.http, "eth_getTransactionReceipt", [deployHash])) as {
        contractAddress: Hex;
      } | null;
      address = receipt?.contractAddress;
      return receipt !== null;
    },
    { timeoutMs: 10_000, what: "the token deployment" },
  );
  if (address === undefined) throw new Error("the token deployment has no contract address");
  return address;
};
