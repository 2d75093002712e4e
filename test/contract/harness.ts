/**
 * A real EVM for contract tests: anvil on a free port, the escrow deployed from abis/, Circle's USDC
 * deployed as on mainnet (scripts/stack/circle-usdc.ts) and our own test tokens for what USDC lacks (no
 * return value, reentrancy), exact control of block time (every transaction is mined at a timestamp the
 * test chooses), and reverts named by the contract's custom error or the token's reason string.
 */
import {
  type Abi,
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  ExecutionRevertedError,
  type Hex,
  http,
  type PrivateKeyAccount,
  parseSignature,
  type TransactionReceipt,
} from "viem";
import { mnemonicToAccount, privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi, MandateEscrowBytecode } from "../../abis/MandateEscrow.ts";
import { NoReturnTokenAbi, NoReturnTokenBytecode } from "../../abis/NoReturnToken.ts";
import { ReentrantTokenAbi, ReentrantTokenBytecode } from "../../abis/ReentrantToken.ts";
import { type RunningAnvil, startAnvil } from "../../scripts/stack/anvil.ts";
import {
  addUsdcMinter,
  type ChainWriter,
  deployCircleUsdc,
  usdcAbi,
} from "../../scripts/stack/circle-usdc.ts";
import { freePort } from "../../scripts/stack/wait.ts";
import { setRelayerTypedData } from "../../service/chains/operator-relayers.ts";
import { PERMIT_TYPES, REVOKE_TYPES, TERMS_TYPES } from "../../service/mandates/terms.ts";
import {
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  type TransferAuthorization,
} from "../../service/payments/transfer-authorization.ts";

export const MNEMONIC = "test test test test test test test test test test test junk";
export const accountAt = (index: number) => {
  const hd = mnemonicToAccount(MNEMONIC, { addressIndex: index });
  const key = hd.getHdKey().privateKey;
  if (!key) throw new Error("no key");
  return privateKeyToAccount(`0x${Buffer.from(key).toString("hex")}`);
};

export type Address = `0x${string}`;

export interface Terms {
  mandateId: Hex;
  payee: Address;
  token: Address;
  cap: bigint;
  anchor: bigint;
  approvalPeriods: number;
  operator: Address;
  holdSeconds: bigint;
  nonce: bigint;
  deadline: bigint;
}

/** The escrow's EIP-712 Terms, as the service signs them. */
export { TERMS_TYPES };

/** A mandate id in the customer's namespace: its address, then a 96-bit salt. */
/** Typed data as the page's API sends it (JSON: integers as decimal strings) back into the values viem signs. */
const typedValues = (
  fields: readonly { name: string; type: string }[],
  message: Record<string, unknown>,
): Record<string, unknown> =>
  Object.fromEntries(
    fields.map(({ name, type }) => [
      name,
      /^u?int/.test(type) ? BigInt(message[name] as string) : message[name],
    ]),
  );

/** EIP-712 typed data as the hosted page's API sends it. */
export interface PageTypedData {
  readonly domain: never;
  readonly message: Record<string, unknown>;
}

/**
 * What the hosted page does with a wallet: signs the terms (and the permit, when the page asks for one)
 * and returns the body of `POST /authorize/{token}/signatures`.
 */
export const signPageTerms = async (
  customer: Pick<PrivateKeyAccount, "address" | "signTypedData">,
  terms: PageTypedData,
  permit: PageTypedData | null,
) => ({
  customer_address: customer.address,
  terms: terms.message,
  signature: await customer.signTypedData({
    domain: terms.domain,
    types: TERMS_TYPES,
    primaryType: "Terms",
    message: typedValues(TERMS_TYPES.Terms, terms.message) as never,
  }),
  permit_signature: permit
    ? await customer.signTypedData({
        domain: permit.domain,
        types: PERMIT_TYPES,
        primaryType: "Permit",
        message: typedValues(PERMIT_TYPES.Permit, permit.message) as never,
      })
    : null,
});

export const mandateIdFor = (customer: Address, salt: bigint): Hex =>
  `0x${customer.slice(2).toLowerCase()}${salt.toString(16).padStart(24, "0")}`;

/**
 * A fresh mandate's terms on `chain`, starting now: 100 USDC a period for 12 periods, no hold, signable for a
 * day; `overrides` change any field.
 */
export const mandateTerms = (
  chain: { readonly usdc: Address; readonly clock: { readonly now: number } },
  parties: { readonly customer: Address; readonly payee: Address; readonly operator: Address },
  salt: bigint,
  overrides: Partial<Terms> = {},
): Terms => ({
  mandateId: mandateIdFor(parties.customer, salt),
  payee: parties.payee,
  token: chain.usdc,
  cap: 100_000_000n,
  anchor: BigInt(chain.clock.now),
  approvalPeriods: 12,
  operator: parties.operator,
  holdSeconds: 0n,
  nonce: 1n,
  deadline: BigInt(chain.clock.now + 86_400),
  ...overrides,
});

export type Outcome =
  | { readonly ok: true; readonly gasUsed: bigint }
  | { readonly ok: false; readonly error: string };

export type ReceiptOutcome =
  | { readonly ok: true; readonly gasUsed: bigint; readonly receipt: TransactionReceipt }
  | { readonly ok: false; readonly error: string };

/** EIP-3009 as USDC (FiatTokenV2) defines it, signed in the token's EIP-2612 domain. */
const AUTHORIZATION_FIELDS = TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization;
export const AUTHORIZATION_TYPES = {
  TransferWithAuthorization: AUTHORIZATION_FIELDS,
  ReceiveWithAuthorization: AUTHORIZATION_FIELDS,
  CancelAuthorization: [
    { name: "authorizer", type: "address" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

export type Authorization = TransferAuthorization;

export const startChain = async (options: { readonly stepsTracing?: boolean } = {}) => {
  const anvil: RunningAnvil = await startAnvil({ port: await freePort(), chainId: 31337, ...options });
  const chain = defineChain({
    id: 31337,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [anvil.http] } },
  });
  const transport = http(anvil.http, { batch: false });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 10 });
  const testClient = createTestClient({ chain, transport, mode: "anvil" });
  const wallet = (account: PrivateKeyAccount) => createWalletClient({ chain, transport, account });
  const deployer = accountAt(0);

  let now = Number((await publicClient.getBlock()).timestamp) + 1;
  /** The time the next transaction will be mined at. */
  const clock = {
    get now() {
      return now;
    },
    advance: (seconds: number) => {
      now += seconds;
    },
  };

  /**
   * The receipt of a sent transaction, polled directly. viem's waitForTransactionReceipt hung here now and
   * then for its whole 180 s timeout: a lookup that misses is retried only when a new block arrives, and
   * with automine and no further transaction none does.
   */
  const receiptFor = async (hash: Hex): Promise<TransactionReceipt> => {
    const giveUp = Date.now() + 60_000;
    for (;;) {
      const receipt = await publicClient.getTransactionReceipt({ hash }).catch(() => undefined);
      if (receipt) return receipt;
      if (Date.now() > giveUp) throw new Error(`no receipt for ${hash}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };

  /** Transactions of a deployment script, each mined at `clock.now` like every other. */
  const writer: ChainWriter = {
    deploy: async (from, bytecode) => {
      await testClient.setNextBlockTimestamp({ timestamp: BigInt(now) });
      const receipt = await receiptFor(await wallet(from).sendTransaction({ data: bytecode }));
      now += 1;
      if (receipt.status !== "success" || !receipt.contractAddress) throw new Error("deployment failed");
      return receipt.contractAddress;
    },
    call: async (from, to, data) => {
      await testClient.setNextBlockTimestamp({ timestamp: BigInt(now) });
      const receipt = await receiptFor(await wallet(from).sendTransaction({ to, data }));
      now += 1;
      if (receipt.status !== "success") throw new Error(`call to ${to} reverted`);
    },
  };

  const deploy = async (abi: Abi, bytecode: Hex): Promise<Address> => {
    await testClient.setNextBlockTimestamp({ timestamp: BigInt(now) });
    const hash = await wallet(deployer).deployContract({ abi, bytecode });
    const receipt = await receiptFor(hash);
    now += 1;
    if (!receipt.contractAddress) throw new Error("deployment failed");
    return receipt.contractAddress;
  };

  /**
   * Runs a contract write mined at `clock.now`: simulated first against the pending block (same time),
   * so a revert is reported by its custom error name; sent only when it would succeed.
   */
  const send = async (
    account: PrivateKeyAccount,
    address: Address,
    abi: Abi,
    functionName: string,
    args: readonly unknown[],
  ): Promise<Outcome> => {
    const outcome = await sendForReceipt(account, address, abi, functionName, args);
    return outcome.ok ? { ok: true, gasUsed: outcome.gasUsed } : outcome;
  };

  /** `send`, also returning the receipt (its logs) of a transaction that succeeded. */
  const sendForReceipt = async (
    account: PrivateKeyAccount,
    address: Address,
    abi: Abi,
    functionName: string,
    args: readonly unknown[],
  ): Promise<ReceiptOutcome> => {
    await testClient.setNextBlockTimestamp({ timestamp: BigInt(now) });
    try {
      const { request } = await publicClient.simulateContract({
        account,
        address,
        abi,
        functionName,
        args,
        blockTag: "pending",
      } as Parameters<typeof publicClient.simulateContract>[0]);
      const hash = await wallet(account).writeContract(
        request as Parameters<ReturnType<typeof wallet>["writeContract"]>[0],
      );
      const receipt = await receiptFor(hash);
      now += 1;
      if (receipt.status !== "success") return { ok: false, error: "reverted after simulation" };
      return { ok: true, gasUsed: receipt.gasUsed, receipt };
    } catch (error) {
      return { ok: false, error: revertName(error) };
    }
  };

  /** A plain ether transfer mined at `clock.now`; refused (a revert when estimating its gas) is "revert". */
  const sendValue = async (account: PrivateKeyAccount, to: Address, value: bigint): Promise<Outcome> => {
    await testClient.setNextBlockTimestamp({ timestamp: BigInt(now) });
    try {
      const hash = await wallet(account).sendTransaction({ to, value });
      const receipt = await receiptFor(hash);
      now += 1;
      if (receipt.status !== "success") return { ok: false, error: "reverted after estimation" };
      return { ok: true, gasUsed: receipt.gasUsed };
    } catch (error) {
      const refused = error instanceof BaseError && error.walk((e) => e instanceof ExecutionRevertedError);
      return { ok: false, error: refused ? "revert" : revertName(error) };
    }
  };

  const read = <T>(address: Address, abi: Abi, functionName: string, args: readonly unknown[] = []) =>
    publicClient.readContract({ address, abi, functionName, args } as Parameters<
      typeof publicClient.readContract
    >[0]) as Promise<T>;

  const escrow = await deploy(MandateEscrowAbi, MandateEscrowBytecode);
  // Circle's roles: account 9 owns, pauses, blacklists and mints; account 10 (unfunded) is the proxy's admin.
  const circle = accountAt(9);
  const circleUsdc = await deployCircleUsdc(writer, {
    deployer,
    proxyAdmin: accountAt(10).address,
    circle,
  });
  await addUsdcMinter(writer, circleUsdc, circle, circle, circle.address, 2n ** 256n - 1n);
  const usdc = circleUsdc.address;
  const noReturn = await deploy(NoReturnTokenAbi, NoReturnTokenBytecode);

  /** Mints `amount` of `token` to `to`: USDC from its minter, our test tokens from their recipient. */
  const mint = (token: Address, to: Address, amount: bigint): Promise<Outcome> =>
    token.toLowerCase() === usdc.toLowerCase()
      ? send(circle, usdc, usdcAbi, "mint", [to, amount])
      : send(deployer, token, NoReturnTokenAbi, "mint", [to, amount]);

  /** The token's EIP-712 domain as it signs permits and EIP-3009 authorizations (USDC: "USD Coin", "2"). */
  const tokenDomain = async (token: Address) => ({
    name: await read<string>(token, usdcAbi, "name"),
    version: await read<string>(token, usdcAbi, "version"),
    chainId: 31337,
    verifyingContract: token,
  });

  const signTerms = (
    customer: PrivateKeyAccount,
    terms: Terms,
    verifyingContract: Address = escrow,
    chainId = 31337,
  ) =>
    customer.signTypedData({
      domain: { name: "MandateEscrow", version: "1", chainId, verifyingContract },
      types: TERMS_TYPES,
      primaryType: "Terms",
      message: terms,
    });

  /** The customer's EIP-712 revocation of a mandate (`revokeWithSignature`); a wallet's owner signs for it. */
  const signRevocation = (
    signer: PrivateKeyAccount,
    mandateId: Hex,
    deadline: bigint,
    verifyingContract: Address = escrow,
    chainId = 31337,
  ) =>
    signer.signTypedData({
      domain: { name: "MandateEscrow", version: "1", chainId, verifyingContract },
      types: REVOKE_TYPES,
      primaryType: "Revoke",
      message: { mandateId, deadline },
    });

  /** An operator's EIP-712 `SetRelayer` (`setRelayerWithSignature`); a wallet's owner signs for it. */
  const signSetRelayer = (
    signer: PrivateKeyAccount,
    message: { relayer: Address; allowed: boolean; nonce: bigint; deadline: bigint },
    verifyingContract: Address = escrow,
    chainId = 31337,
  ) => signer.signTypedData(setRelayerTypedData(chainId, verifyingContract, message));

  const signPermit = async (owner: PrivateKeyAccount, token: Address, value: bigint, deadline: bigint) => {
    const nonce = await read<bigint>(token, usdcAbi, "nonces", [owner.address]);
    const signature = await owner.signTypedData({
      domain: await tokenDomain(token),
      types: PERMIT_TYPES,
      primaryType: "Permit",
      message: { owner: owner.address, spender: escrow, value, nonce, deadline },
    });
    const { v, r, s } = parseSignature(signature);
    return { v: Number(v), r, s };
  };

  /** `signer`'s EIP-3009 transfer (or receive) authorization on `token`, split for the token's (v, r, s) arguments. */
  const signAuthorization = async (
    signer: PrivateKeyAccount,
    token: Address,
    authorization: Authorization,
    primaryType: "TransferWithAuthorization" | "ReceiveWithAuthorization" = "TransferWithAuthorization",
  ) => {
    const signature = await signer.signTypedData({
      domain: await tokenDomain(token),
      types: AUTHORIZATION_TYPES,
      primaryType,
      message: authorization,
    });
    const { v, r, s } = parseSignature(signature);
    return { v: Number(v), r, s, signature };
  };

  /** `signer`'s EIP-3009 cancellation of `authorizer`'s `nonce` on `token`. */
  const signCancelAuthorization = async (
    signer: PrivateKeyAccount,
    token: Address,
    authorizer: Address,
    nonce: Hex,
  ) => {
    const signature = await signer.signTypedData({
      domain: await tokenDomain(token),
      types: AUTHORIZATION_TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer, nonce },
    });
    const { v, r, s } = parseSignature(signature);
    return { v: Number(v), r, s, signature };
  };

  return {
    anvil,
    publicClient,
    testClient,
    clock,
    deploy,
    send,
    sendForReceipt,
    sendValue,
    read,
    escrow,
    usdc,
    /** Circle on this chain: the USDC's owner, pauser, blacklister and a minter. */
    circle,
    noReturn,
    mint,
    signTerms,
    signRevocation,
    signSetRelayer,
    signPermit,
    signAuthorization,
    signCancelAuthorization,
    deployReentrant: () => deploy(ReentrantTokenAbi, ReentrantTokenBytecode),
    stop: () => anvil.stop(),
  };
};

export type Chain = Awaited<ReturnType<typeof startChain>>;

export const revertName = (error: unknown): string => {
  if (error instanceof BaseError) {
    const reverted = error.walk((e) => e instanceof ContractFunctionRevertedError);
    if (reverted instanceof ContractFunctionRevertedError) {
      const name = reverted.data?.errorName;
      // A require() with a message (Circle's USDC): the message itself names it.
      return (name === undefined || name === "Error" ? reverted.reason : name) ?? "revert";
    }
  }
  return `unexpected: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`;
};
