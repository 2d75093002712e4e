/**
 * The chain config (`config/chains.json`, or the file `CHAINS_CONFIG` names), decoded with a Schema that
 * refuses unknown keys and names the bad field. A chain marked `local` is a development chain: the local
 * stack starts anvil for it, deploys its contracts (once: recorded in `.data/deployments.json` and kept by
 * anvil's state file) and writes a resolved config (`.data/chains.resolved.json`) in which every chain has
 * its RPC URLs and addresses. Ponder's config and the service read only the resolved file, so they cannot
 * disagree. `native_currency` (what wallets are offered, and viem's chain object) is required off local
 * chains.
 */
import { readFileSync } from "node:fs";
import { Effect, Result, Schema } from "effect";
import { MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { formatSchemaError } from "../schema-errors.ts";

const Address = Schema.String.check(
  Schema.isPattern(/^0x[0-9a-fA-F]{40}$/, { message: "must be a 0x-prefixed 20-byte hex address" }),
);
const HttpUrl = Schema.String.check(
  Schema.isPattern(/^https?:\/\/\S+$/, { message: "must be an http(s):// URL" }),
);
const WsUrl = Schema.String.check(Schema.isPattern(/^wss?:\/\/\S+$/, { message: "must be a ws(s):// URL" }));
const Symbol_ = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9.]{1,16}$/, { message: "must be 1-16 letters, digits or dots" }),
);
const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0));
const Wei = Schema.String.check(
  Schema.isPattern(/^[0-9]{1,78}$/, { message: "must be a whole number of wei, as a decimal string" }),
);

/**
 * Calls the service sends in one JSON-RPC batch when the chain config names no `rpc.batch_size`. The
 * calls made within one timer tick go in one HTTP request (in the billing bench's set-up, 5.4 times
 * fewer requests); 100 keeps a batch within what hosted RPC providers document as reliable.
 */
export const DEFAULT_RPC_BATCH_SIZE = 100;

/**
 * JSON-RPC calls per second per process on a chain that is not local and names no
 * `rpc.requests_per_second`: the sustained rate hosted providers' free and entry plans allow.
 */
export const DEFAULT_RPC_REQUESTS_PER_SECOND = 25;

/** Blocks a URL's head may trail the best of the chain's other URLs before it is set aside. */
export const DEFAULT_RPC_MAX_LAG_BLOCKS = 3;

/** The relayer's spending limit per chain and hour when the chain config names none: 1 native coin. */
export const DEFAULT_RELAYER_BUDGET_WEI_PER_HOUR = 10n ** 18n;

/**
 * The part of a chain's hourly relayer budget the transactions serving one merchant may take when the
 * chain config names no `relayer_merchant_share`: half, so no single merchant can spend the budget.
 */
export const DEFAULT_RELAYER_MERCHANT_SHARE = 0.5;

/**
 * How long (chain seconds) a payer whose gasless transfer or wallet deployment reverted is refused
 * gasless transfers on the chain when the chain config names no `gasless_cooling_off_seconds`.
 */
export const DEFAULT_GASLESS_COOLING_OFF_SECONDS = 3600;

/**
 * A token the chain accepts. `deploy` (local chains only) names what the dev stack deploys:
 * `FiatTokenV2_2` is Circle's USDC as deployed on mainnet, `TestUSDC` our own test token.
 */
const TokenConfig = Schema.Struct({
  symbol: Symbol_,
  decimals: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 36 })),
  address: Schema.optionalKey(Address),
  deploy: Schema.optionalKey(Schema.Literals(["FiatTokenV2_2", "TestUSDC"])),
  /**
   * The smallest one-time payment in this token, in its units ("0.01"); default 0.01 of the token (a cent
   * of a dollar stablecoin), or 1 base unit for a token with fewer than 2 decimals. Every payment costs
   * the relayer a sweep, whatever its amount.
   */
  min_payment: Schema.optionalKey(Schema.String),
});

/** The smallest payment in a token, in base units (its `min_payment`, or 0.01 of the token). */
export const minPaymentUnits = (token: {
  readonly decimals: number;
  readonly min_payment?: string | undefined;
}): bigint => {
  const configured =
    token.min_payment === undefined
      ? undefined
      : parseDecimal(token.min_payment, token.decimals, MAX_CAP_UNITS);
  return configured !== undefined && Result.isSuccess(configured)
    ? configured.success
    : 10n ** BigInt(Math.max(0, token.decimals - 2));
};

/** The chain's own coin, which pays gas: what wallets show, and the unit of the relayer's balance. */
const NativeCurrency = Schema.Struct({
  name: Schema.String.check(Schema.isBetweenLength(1, 64)),
  symbol: Symbol_,
  decimals: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 36 })),
});
export type NativeCurrency = typeof NativeCurrency.Type;

/** A local chain's coin when its config names none: anvil's ether. */
const LOCAL_NATIVE_CURRENCY: NativeCurrency = { name: "Ether", symbol: "ETH", decimals: 18 };

/**
 * How the relayer pays gas on the chain (every field optional). Fee ceilings: no transaction offers more
 * per gas; while the chain's base fee is above `max_fee_per_gas_wei` transactions wait (recorded, not
 * sent). Balances: below `low_balance_wei` the relayer alerts; below `min_balance_wei` it refuses new
 * submissions (503 `relayer_balance_low`).
 */
const GasConfig = Schema.Struct({
  max_fee_per_gas_wei: Schema.optionalKey(Wei),
  max_priority_fee_per_gas_wei: Schema.optionalKey(Wei),
  /** How many times a stuck transaction may be replaced with higher fees (default 10). */
  max_replacements: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 100 }))),
  /**
   * How the gas limit is measured: `access_list` (default: one `eth_createAccessList` run, and
   * `eth_estimateGas` once the node refuses that method) or `estimate_gas` (never asks for access lists).
   */
  gas_limit_from: Schema.optionalKey(Schema.Literals(["access_list", "estimate_gas"])),
  low_balance_wei: Schema.optionalKey(Wei),
  min_balance_wei: Schema.optionalKey(Wei),
});
export type GasConfig = typeof GasConfig.Type;

/** How many times a stuck transaction is replaced when the chain config names no `gas.max_replacements`. */
export const DEFAULT_MAX_REPLACEMENTS = 10;

const EnvName = Schema.String.check(
  Schema.isPattern(/^[A-Z_][A-Z0-9_]{0,63}$/, {
    message: "must be an environment variable's name (A-Z, 0-9, _)",
  }),
);

/**
 * Where the chain's relayer key comes from; the chains file never holds a secret. `key_env`: the
 * environment variable holding the key (0x and 64 hex digits); `keystore`: an encrypted Web3 Secret
 * Storage (V3) file, as geth and `cast wallet import` write it, and the variable holding its password.
 * Without either, the chain uses RELAYER_PRIVATE_KEY.
 */
const RelayerKeySource = Schema.Union([
  Schema.Struct({ key_env: EnvName }),
  Schema.Struct({ keystore: Schema.String.check(Schema.isBetweenLength(1, 4096)), password_env: EnvName }),
]);
export type RelayerKeySource = typeof RelayerKeySource.Type;

const EscrowConfig = Schema.Struct({
  address: Schema.optionalKey(Address),
  start_block: Schema.optionalKey(NonNegativeInt),
});

/**
 * One chain, as an operator writes it. A chain with `local` is a development chain: the dev stack
 * starts anvil for it, deploys its contracts and fills in `rpc` and the addresses.
 */
export const ChainConfig = Schema.Struct({
  id: Schema.Int.check(Schema.isGreaterThan(0)),
  name: Schema.String.check(Schema.isBetweenLength(1, 64)),
  livemode: Schema.Boolean,
  local: Schema.optionalKey(
    Schema.Struct({ port: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 65535 })) }),
  ),
  rpc: Schema.optionalKey(
    Schema.Struct({
      http: Schema.NonEmptyArray(HttpUrl),
      ws: Schema.optionalKey(WsUrl),
      /** Most calls the service sends in one JSON-RPC batch (default 100); 0 or 1 sends each alone. */
      batch_size: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1000 }))),
      /**
       * JSON-RPC calls per second a process sends to this chain, over all its URLs (a batch counts as its
       * calls); above it calls wait. Default 25 on a chain that is not local, none on a local one.
       */
      requests_per_second: Schema.optionalKey(
        Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100_000 })),
      ),
      /** A URL whose head is more than this many blocks behind the best of the others is not used (default 3). */
      max_lag_blocks: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 10_000 }))),
    }),
  ),
  /** Required for a chain that is not local (a local chain's is anvil's ether). */
  native_currency: Schema.optionalKey(NativeCurrency),
  /** The RPC URL offered to customers' wallets when they add the chain; must carry no secret. */
  wallet_rpc_url: Schema.optionalKey(HttpUrl),
  escrow: EscrowConfig,
  tokens: Schema.Array(TokenConfig),
  subscriptions_available: Schema.Boolean,
  /** One-time payments (deposit addresses) can be created; independent of subscriptions_available. */
  payments_available: Schema.Boolean,
  escrow_available: Schema.Boolean,
  hold_seconds: NonNegativeInt,
  confirmations: NonNegativeInt,
  /**
   * The address new mandates' and payments' terms name as their operator: a cold key or a Safe that
   * names the relayer keys allowed to act for it (`setRelayer`), so a relayer key rotates without any
   * customer signing again. Default: the relayer's own address (then a new key means new terms).
   */
  operator: Schema.optionalKey(Address),
  /** Where the relayer key of this chain comes from (default: RELAYER_PRIVATE_KEY). */
  relayer: Schema.optionalKey(RelayerKeySource),
  /** Most the relayer may spend on gas on this chain in any hour (default 10^18 wei). */
  relayer_budget_wei_per_hour: Schema.optionalKey(Wei),
  /**
   * The part of that budget (above 0, at most 1; default 0.5) the transactions serving one merchant may
   * take in any hour; a transaction serving several counts against each its part (chains/relayer-shares.ts).
   */
  relayer_merchant_share: Schema.optionalKey(
    Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1, exclusiveMinimum: true })),
  ),
  /**
   * Chain seconds (default 3600) for which a payer whose gasless transfer or wallet deployment reverted
   * is refused further gasless transfers on the chain (payments/gasless-payers.ts); 0: never.
   */
  gasless_cooling_off_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 30 * 86_400 })),
  ),
  /** Fee ceilings, replacements, the gas-limit method and balance thresholds of the relayer. */
  gas: Schema.optionalKey(GasConfig),
  /**
   * Wallet factories the relayer may call to deploy a customer's smart wallet that signed with an
   * ERC-6492 wrapper (chains/wallet-deployments.ts); a wrapper naming another factory is refused.
   */
  wallet_factories: Schema.optionalKey(Schema.Array(Address)),
});
export type ChainConfig = typeof ChainConfig.Type;

export const ChainsFile = Schema.Struct({ chains: Schema.Array(ChainConfig) });
export type ChainsFile = typeof ChainsFile.Type;

/** A chain whose RPC and addresses are all known: what the indexer and the service run on. */
export interface ResolvedChain extends ChainConfig {
  readonly rpc: {
    readonly http: readonly [string, ...string[]];
    readonly ws?: string;
    readonly batch_size?: number;
    readonly requests_per_second?: number;
    readonly max_lag_blocks?: number;
  };
  readonly escrow: { readonly address: `0x${string}`; readonly start_block: number };
  readonly tokens: ReadonlyArray<{
    readonly symbol: string;
    readonly decimals: number;
    readonly address: `0x${string}`;
    readonly min_payment?: string;
  }>;
}

/** The chain's native currency (a local chain's default: ether). */
export const nativeCurrencyOf = (chain: ChainConfig): NativeCurrency =>
  chain.native_currency ?? LOCAL_NATIVE_CURRENCY;

/** The chain's token at `address` (any case), if the chain lists it. */
export const tokenOf = (chain: ResolvedChain | undefined, address: string) =>
  chain?.tokens.find((token) => token.address.toLowerCase() === address.toLowerCase());

export class ChainConfigError extends Schema.TaggedError<ChainConfigError>()("ChainConfigError", {
  message: Schema.String,
}) {}

const semanticChecks = (file: ChainsFile): string[] => {
  const problems: string[] = [];
  const seen = new Set<number>();
  file.chains.forEach((chain, i) => {
    const at = `chains[${i}]`;
    if (seen.has(chain.id)) problems.push(`${at}.id: chain ${chain.id} is listed twice`);
    seen.add(chain.id);
    if (chain.local && chain.livemode) problems.push(`${at}.livemode: a local chain cannot be live`);
    if (!chain.local && !chain.rpc) problems.push(`${at}.rpc: required for a chain that is not local`);
    if (!chain.local && !chain.native_currency)
      problems.push(
        `${at}.native_currency: required for a chain that is not local, e.g. {"name": "Ether", "symbol": "ETH", "decimals": 18}`,
      );
    if (!chain.escrow_available && chain.hold_seconds !== 0)
      problems.push(`${at}.hold_seconds: must be 0 when escrow_available is false`);
    const gas = chain.gas;
    if (
      gas?.max_fee_per_gas_wei !== undefined &&
      gas.max_priority_fee_per_gas_wei !== undefined &&
      BigInt(gas.max_priority_fee_per_gas_wei) > BigInt(gas.max_fee_per_gas_wei)
    )
      problems.push(`${at}.gas.max_priority_fee_per_gas_wei: must not exceed max_fee_per_gas_wei`);
    if (
      gas?.low_balance_wei !== undefined &&
      gas.min_balance_wei !== undefined &&
      BigInt(gas.min_balance_wei) > BigInt(gas.low_balance_wei)
    )
      problems.push(`${at}.gas.min_balance_wei: must not exceed low_balance_wei (the alert comes first)`);
    const symbols = new Set<string>();
    chain.tokens.forEach((token, j) => {
      const t = `${at}.tokens[${j}]`;
      if (symbols.has(token.symbol)) problems.push(`${t}.symbol: ${token.symbol} is listed twice`);
      symbols.add(token.symbol);
      if (token.address === undefined && token.deploy === undefined)
        problems.push(`${t}.address: required (or "deploy" on a local chain)`);
      if (token.deploy !== undefined && !chain.local)
        problems.push(`${t}.deploy: only allowed on a local chain`);
      const minimum =
        token.min_payment === undefined
          ? undefined
          : parseDecimal(token.min_payment, token.decimals, MAX_CAP_UNITS);
      if (minimum !== undefined && Result.isFailure(minimum))
        problems.push(`${t}.min_payment: ${minimum.failure.message}`);
    });
  });
  return problems;
};

/** Decodes and checks a chains file's JSON text. The error names the bad field. */
export const parseChainsFile = (text: string, source: string): Effect.Effect<ChainsFile, ChainConfigError> =>
  Effect.gen(function* () {
    const json = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (e) => new ChainConfigError({ message: `${source}: not valid JSON (${String(e)})` }),
    });
    const decoded = Schema.decodeUnknownResult(ChainsFile)(json, {
      onExcessProperty: "error",
      errors: "all",
    });
    if (Result.isFailure(decoded)) {
      return yield* new ChainConfigError({ message: `${source}: ${formatSchemaError(decoded.failure)}` });
    }
    const problems = semanticChecks(decoded.success);
    if (problems.length > 0)
      return yield* new ChainConfigError({ message: `${source}: ${problems.join("; ")}` });
    return decoded.success;
  });

/** Every chain must be resolved (rpc and all addresses known) before the indexer or service can use it. */
export const requireResolved = (
  file: ChainsFile,
  source: string,
): Effect.Effect<ResolvedChain[], ChainConfigError> => {
  const problems: string[] = [];
  file.chains.forEach((chain, i) => {
    if (!chain.rpc) problems.push(`chains[${i}].rpc: missing (start local chains with npm start)`);
    chain.tokens.forEach((token, j) => {
      if (!token.address) problems.push(`chains[${i}].tokens[${j}].address: missing (not deployed yet)`);
    });
    if (chain.escrow && !chain.escrow.address)
      problems.push(`chains[${i}].escrow.address: missing (not deployed yet)`);
  });
  if (problems.length > 0)
    return Effect.fail(new ChainConfigError({ message: `${source}: ${problems.join("; ")}` }));
  return Effect.succeed(file.chains as unknown as ResolvedChain[]);
};

export const loadChainsFile = (path: string): Effect.Effect<ChainsFile, ChainConfigError> =>
  Effect.try({
    try: () => readFileSync(path, "utf8"),
    catch: (e) => new ChainConfigError({ message: `${path}: cannot read (${String(e)})` }),
  }).pipe(Effect.flatMap((text) => parseChainsFile(text, path)));
