/** The customer's wallet: an injected EIP-1193 provider, and what its errors mean (both hosted pages). */

export type Address = `0x${string}`;

/** EIP-712 typed data as `eth_signTypedData_v4` takes it (JSON). */
export interface TypedData {
  readonly domain: Readonly<Record<string, unknown>>;
  readonly types: Readonly<Record<string, ReadonlyArray<{ readonly name: string; readonly type: string }>>>;
  readonly primaryType: string;
  readonly message: Readonly<Record<string, unknown>>;
}

export interface Eip1193Provider {
  request(args: { readonly method: string; readonly params?: readonly unknown[] }): Promise<unknown>;
}

/** EIP-1193 / EIP-1474 codes the page reacts to. */
export const USER_REJECTED = 4001;
export const UNRECOGNIZED_CHAIN = 4902;
export const REQUEST_PENDING = -32002;

const codeOf = (value: unknown): number | null => {
  if (typeof value !== "object" || value === null) return null;
  const { code } = value as { code?: unknown };
  return typeof code === "number" ? code : null;
};

/**
 * The error code of a provider error. Some wallets wrap the original (MetaMask mobile puts 4902 in
 * `data.originalError`), so those places are read too.
 */
export const errorCode = (error: unknown): number | null => {
  const direct = codeOf(error);
  if (direct !== null && direct !== -32603) return direct;
  const data = (error as { data?: unknown } | null)?.data;
  const nested = codeOf((data as { originalError?: unknown } | undefined)?.originalError) ?? codeOf(data);
  return nested ?? direct;
};

export const errorMessage = (error: unknown): string => {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" && message.length > 0 ? message : String(error);
};

/** What a failed wallet request means for the page: the customer declined, or the wallet's own error. */
export type WalletFailure =
  | { readonly kind: "rejected" }
  | { readonly kind: "wallet"; readonly title: string; readonly message: string };

export const walletFailure = (error: unknown): WalletFailure => {
  const code = errorCode(error);
  if (code === USER_REJECTED) return { kind: "rejected" };
  if (code === REQUEST_PENDING)
    return {
      kind: "wallet",
      title: "Check your wallet",
      message: "Your wallet already has a request waiting. Open your wallet and answer it, then try again.",
    };
  return {
    kind: "wallet",
    title: "Wallet error",
    message: `Your wallet reported an error: ${errorMessage(error)}`,
  };
};

const hexChainId = (id: number) => `0x${id.toString(16)}`;

export interface ChainToAdd {
  readonly id: number;
  readonly name: string;
  readonly rpcUrl: string;
  readonly nativeCurrency: { readonly name: string; readonly symbol: string; readonly decimals: number };
}

export interface TransactionReceipt {
  readonly status: string;
}

export const walletActions = (provider: Eip1193Provider) => ({
  requestAccounts: async (): Promise<readonly Address[]> =>
    (await provider.request({ method: "eth_requestAccounts" })) as Address[],
  accounts: async (): Promise<readonly Address[]> =>
    (await provider.request({ method: "eth_accounts" })) as Address[],
  chainId: async (): Promise<number> => Number(await provider.request({ method: "eth_chainId" })),
  switchChain: (id: number) =>
    provider.request({ method: "wallet_switchEthereumChain", params: [{ chainId: hexChainId(id) }] }),
  addChain: (chain: ChainToAdd) =>
    provider.request({
      method: "wallet_addEthereumChain",
      params: [
        {
          chainId: hexChainId(chain.id),
          chainName: chain.name,
          rpcUrls: [chain.rpcUrl],
          nativeCurrency: chain.nativeCurrency,
        },
      ],
    }),
  signTypedData: async (account: Address, typedData: TypedData): Promise<string> =>
    String(
      await provider.request({
        method: "eth_signTypedData_v4",
        params: [account, JSON.stringify(typedData)],
      }),
    ),
  sendTransaction: async (tx: { from: Address; to: Address; data: string }): Promise<string> =>
    String(await provider.request({ method: "eth_sendTransaction", params: [tx] })),
  receipt: async (hash: string): Promise<TransactionReceipt | null> =>
    (await provider.request({
      method: "eth_getTransactionReceipt",
      params: [hash],
    })) as TransactionReceipt | null,
});

export type WalletActions = ReturnType<typeof walletActions>;
