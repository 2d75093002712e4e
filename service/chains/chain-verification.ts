/**
 * The checks a chain that is not local passes before the service or the indexer starts on it: a wrong
 * escrow address would have payers send money to deposit addresses nothing can sweep, a wrong RPC would
 * index another chain, a missing `start_block` would backfill from genesis. Each problem is one line
 * naming the chain and the rule; the caller refuses to start on any (the process exits 2). Local chains
 * are the stack's own (it deployed them a moment ago, and named its relayer) and are not checked.
 *
 * Run by the service before it builds its runtime, by Ponder's config and by the stack before the
 * indexer starts: every RPC URL's `eth_chainId`; the escrow's and the collector's runtime code against
 * the compiled code (contract-code.ts); each token's code and `decimals()`; `start_block`; and (the
 * service) that the relayer key is not a publicly known development key (public-keys.ts). A URL that
 * does not answer is tolerated while another of the chain's URLs answers; one that answers for another
 * chain never is.
 */
import { Effect, Schema } from "effect";
import { createPublicClient, erc20Abi, type Hex, http, type PublicClient } from "viem";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import {
  COLLECTOR_CODE,
  type CompiledCode,
  codeHashOf,
  collectorAddress,
  compiledCodeHash,
  ESCROW_CODE,
} from "./contract-code.ts";
import { publiclyKnownAddress } from "./public-keys.ts";

export class ChainsRefused extends Schema.TaggedError<ChainsRefused>()("ChainsRefused", {
  problems: Schema.Array(Schema.String),
}) {
  override get message(): string {
    return this.problems.join("\n");
  }
}

/** What the checks read of a chain's config (a resolved chain, or one an operator wrote). */
export interface ChainToVerify {
  readonly id: number;
  readonly name: string;
  readonly local?: unknown;
  readonly operator?: string;
  readonly rpc?: { readonly http: readonly string[] };
  readonly escrow: { readonly address?: string; readonly start_block?: number };
  readonly tokens: ReadonlyArray<{
    readonly symbol: string;
    readonly decimals: number;
    readonly address?: string;
  }>;
}

export interface VerifyOptions {
  /**
   * Each chain's relayer address: a publicly known key is refused, and so is one the chain's `operator`
   * has not named (`isRelayer`). Omitted by the indexer, which has no key.
   */
  readonly relayers?: ReadonlyMap<number, string>;
  /** Per RPC call (default 10 s). */
  readonly timeoutMs?: number;
}

const firstLine = (error: unknown) =>
  (error instanceof Error
    ? ((error as { shortMessage?: string }).shortMessage ?? error.message)
    : String(error)
  )
    .split("\n")[0]
    ?.slice(0, 200) ?? "";

const call = <A>(f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (error) => firstLine(error) }).pipe(Effect.result);

/** The problems of one chain, each a line `chain <id> (<name>): <rule>`. */
const problemsOf = (chain: ChainToVerify, options: VerifyOptions): Effect.Effect<string[]> =>
  Effect.gen(function* () {
    const problems: string[] = [];
    const refuse = (rule: string) => problems.push(`chain ${chain.id} (${chain.name}): ${rule}`);
    if (chain.escrow.start_block === undefined)
      refuse(
        "escrow.start_block is missing (the indexer would read the chain from genesis; npm run deploy prints it)",
      );
    const relayer = options.relayers?.get(chain.id);
    const relayerKey = relayer === undefined ? undefined : publiclyKnownAddress(relayer);
    if (relayerKey !== undefined)
      refuse(`the relayer key is publicly known (${relayerKey}); use a key of your own`);
    const operatorKey = chain.operator === undefined ? undefined : publiclyKnownAddress(chain.operator);
    if (operatorKey !== undefined)
      refuse(`operator ${chain.operator} is a publicly known account (${operatorKey}); name one of your own`);
    const urls = chain.rpc?.http ?? [];
    if (urls.length === 0) {
      refuse("rpc.http is missing");
      return problems;
    }
    const clients = urls.map((url) =>
      createPublicClient({ transport: http(url, { timeout: options.timeoutMs ?? 10_000, retryCount: 1 }) }),
    );
    // Every URL that answers must be this chain's; at least one must answer. One that is down now may be
    // a provider's passing outage, which its fallback covers; one on another chain never is.
    const answers = yield* Effect.forEach(clients, (client) => call(() => client.getChainId()), {
      concurrency: "unbounded",
    });
    let reader: PublicClient | undefined;
    for (const [i, answer] of answers.entries()) {
      if (answer._tag === "Failure") continue;
      if (answer.success !== chain.id)
        refuse(`eth_chainId of rpc.http[${i}] is ${answer.success}, not ${chain.id}`);
      else reader ??= clients[i];
    }
    if (reader === undefined) {
      if (answers.every((answer) => answer._tag === "Failure"))
        refuse(
          `no rpc.http URL answered eth_chainId (${answers.map((a) => (a._tag === "Failure" ? a.failure : "")).join("; ")})`,
        );
      return problems;
    }
    const client = reader;

    const codeMatches = (address: Hex, compiled: CompiledCode, what: string) =>
      Effect.gen(function* () {
        const code = yield* call(() => client.getCode({ address }));
        if (code._tag === "Failure") {
          refuse(`${what} ${address}: eth_getCode failed (${code.failure})`);
          return false;
        }
        if (code.success === undefined || code.success === "0x") {
          refuse(`${what} ${address} has no code (deploy it with npm run deploy)`);
          return false;
        }
        const hash = codeHashOf(code.success, compiled);
        if (hash !== compiledCodeHash(compiled)) {
          refuse(
            `${what} ${address} is not the compiled ${compiled.name} (code hash ${hash}, compiled ${compiledCodeHash(compiled)})`,
          );
          return false;
        }
        return true;
      });

    const escrow = chain.escrow.address as Hex | undefined;
    if (escrow === undefined) refuse("escrow.address is missing (npm run deploy prints it)");
    else if (yield* codeMatches(escrow, ESCROW_CODE, "escrow.address")) {
      // Deposit addresses are computed from the collector at the escrow's nonce 1: it must be the one the
      // escrow sends to, and hold the compiled collector's code.
      const expected = collectorAddress(escrow);
      const named = yield* call(() =>
        client.readContract({ address: escrow, abi: MandateEscrowAbi, functionName: "collector" }),
      );
      if (named._tag === "Failure") refuse(`escrow ${escrow}: collector() failed (${named.failure})`);
      else if (named.success.toLowerCase() !== expected)
        refuse(`escrow ${escrow} names collector ${named.success}, not ${expected} (its nonce-1 contract)`);
      else yield* codeMatches(expected, COLLECTOR_CODE, "the escrow's collector");
      const operator = chain.operator as Hex | undefined;
      if (
        operator !== undefined &&
        relayer !== undefined &&
        operator.toLowerCase() !== relayer.toLowerCase()
      ) {
        const named = yield* call(() =>
          client.readContract({
            address: escrow,
            abi: MandateEscrowAbi,
            functionName: "isRelayer",
            args: [operator, relayer as Hex],
          }),
        );
        if (named._tag === "Failure") refuse(`escrow ${escrow}: isRelayer() failed (${named.failure})`);
        else if (!named.success)
          refuse(
            `operator ${operator} has not named relayer ${relayer} on the escrow (npm run relayer -- sign --chain ${chain.id} --relayer ${relayer} --allowed true, then submit)`,
          );
      }
    }

    yield* Effect.forEach(
      chain.tokens,
      (token) =>
        Effect.gen(function* () {
          const address = token.address as Hex | undefined;
          if (address === undefined) return refuse(`token ${token.symbol}: address is missing`);
          const code = yield* call(() => client.getCode({ address }));
          if (code._tag === "Failure")
            return refuse(`token ${token.symbol} ${address}: eth_getCode failed (${code.failure})`);
          if (code.success === undefined || code.success === "0x")
            return refuse(`token ${token.symbol} ${address} has no code`);
          const decimals = yield* call(() =>
            client.readContract({ address, abi: erc20Abi, functionName: "decimals" }),
          );
          if (decimals._tag === "Failure")
            return refuse(`token ${token.symbol} ${address}: decimals() failed (${decimals.failure})`);
          if (decimals.success !== token.decimals)
            refuse(
              `token ${token.symbol} ${address} has decimals() ${decimals.success}, config says ${token.decimals}`,
            );
        }),
      { concurrency: "unbounded", discard: true },
    );
    return problems;
  });

/**
 * Checks every chain that is not local, all at once; fails with every problem found (one line each).
 */
export const verifyChains = (
  chains: readonly ChainToVerify[],
  options: VerifyOptions = {},
): Effect.Effect<void, ChainsRefused> =>
  Effect.forEach(
    chains.filter((chain) => chain.local === undefined),
    (chain) => problemsOf(chain, options),
    { concurrency: "unbounded" },
  ).pipe(
    Effect.flatMap((lists) => {
      const problems = lists.flat();
      return problems.length === 0 ? Effect.void : Effect.fail(new ChainsRefused({ problems }));
    }),
  );
