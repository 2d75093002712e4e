/**
 * One viem client per configured chain, shared by everything that reads a chain or simulates a call:
 * the relayer, charges, the authorization page and the test helpers. Its transport (rpc-transport.ts)
 * spreads the calls over the chain's URLs, within the chain's request rate. Calls made within one timer
 * tick share a JSON-RPC batch (viem's `batch`): the authorization page's reads, the relayer's and the
 * workers' calls; each call keeps its own answer or error.
 */
import { Context, Effect, Layer, Schema } from "effect";
import { Agent } from "undici";
import {
  BaseError,
  type Chain,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  createPublicClient,
  decodeErrorResult,
  defineChain,
  encodeFunctionData,
  type Hex,
  type PublicClient,
  type Transport,
} from "viem";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { nativeCurrencyOf, type ResolvedChain } from "./config.ts";
import { type MeasuredCall, measureGas } from "./gas-measure.ts";
import { fetchOver } from "./rpc-fetch.ts";
import { type ChainTransport, chainTransport, type LagChange, type RpcNodeStatus } from "./rpc-transport.ts";

/** The chain could not be reached or answered nonsense: our problem, not the caller's. */
export class ChainUnavailable extends Schema.TaggedError<ChainUnavailable>()("ChainUnavailable", {
  chainId: Schema.Number,
  message: Schema.String,
}) {}

/**
 * A simulated escrow call that would revert: the escrow's custom error name, or `Error` with the
 * `reason` string a token reverted with (Circle's USDC: `Blacklistable: account is blacklisted`,
 * `Pausable: paused`), which the escrow passes on.
 */
export class EscrowRevert extends Schema.TaggedError<EscrowRevert>()("EscrowRevert", {
  errorName: Schema.String,
  reason: Schema.optionalKey(Schema.String),
  message: Schema.String,
}) {}

export type EscrowFunction =
  | "charge"
  | "chargeMany"
  | "release"
  | "releaseMany"
  | "returnCharge"
  | "authorize"
  | "authorizeWithPermit"
  | "authorizeMany"
  | "sweep"
  | "releasePayments"
  | "returnPayment"
  | "lowerCap"
  | "revokeWithSignature";

export const escrowCallData = (functionName: EscrowFunction, args: readonly unknown[]): Hex =>
  encodeFunctionData({ abi: MandateEscrowAbi, functionName, args } as Parameters<
    typeof encodeFunctionData
  >[0]);

/** A contract call the contract answered with a revert or no data (it lacks the function), not a chain that failed. */
export const lacksFunction = (error: unknown) =>
  error instanceof BaseError &&
  error.walk(
    (e) => e instanceof ContractFunctionRevertedError || e instanceof ContractFunctionZeroDataError,
  ) !== null;

const firstLine = (error: unknown) => String(error).split("\n")[0] ?? "unknown error";

export class ChainClients extends Context.Service<
  ChainClients,
  {
    readonly client: (chain: ResolvedChain) => PublicClient<Transport, Chain>;
    /** The timestamp of the chain's latest block: "now" for periods and deadlines on that chain. */
    readonly latestTime: (chain: ResolvedChain) => Effect.Effect<number, ChainUnavailable>;
    /** The chain's latest block: its number and timestamp. */
    readonly latestBlock: (
      chain: ResolvedChain,
    ) => Effect.Effect<{ readonly number: bigint; readonly timestamp: number }, ChainUnavailable>;
    /** Simulates an escrow call from `from`; fails with the contract's error when it would revert. */
    readonly simulateEscrow: (
      chain: ResolvedChain,
      from: Hex,
      functionName: EscrowFunction,
      args: readonly unknown[],
    ) => Effect.Effect<void, EscrowRevert | ChainUnavailable>;
    /**
     * Gas an escrow call from `from` uses (one `eth_createAccessList` run), so a caller that sends it
     * needs no second run; fails when it would revert or the node could not say (the caller then learns
     * why from `simulateOutcome`). On the pending state unless `at` says `latest`: anvil builds its
     * pending state per request by running every transaction in its pool again (6 ms of anvil's CPU per
     * authorisation in the billing bench's set-up, against 1.3 ms at `latest`).
     */
    readonly measureEscrow: (
      chain: ResolvedChain,
      from: Hex,
      functionName: EscrowFunction,
      args: readonly unknown[],
      at?: "pending" | "latest",
    ) => Effect.Effect<bigint, ChainUnavailable>;
    /** Gas any call uses (gas-measure.ts: an access-list run, or eth_estimateGas where refused). */
    readonly measureCall: (
      chain: ResolvedChain,
      call: MeasuredCall,
    ) => Effect.Effect<bigint, ChainUnavailable>;
    /** The same simulation with a revert as its result: undefined when the call would succeed. */
    readonly simulateOutcome: (
      chain: ResolvedChain,
      from: Hex,
      functionName: EscrowFunction,
      args: readonly unknown[],
    ) => Effect.Effect<EscrowRevert | undefined, ChainUnavailable>;
    readonly rpc: <A>(
      chain: ResolvedChain,
      what: string,
      f: () => Promise<A>,
    ) => Effect.Effect<A, ChainUnavailable>;
    /** The chain's RPC URLs as its transport sees them (rpc-transport.ts): head, lag, failures. */
    readonly rpcUrls: (chain: ResolvedChain) => ReadonlyArray<RpcNodeStatus>;
  }
>()("ChainClients") {
  static readonly layer = Layer.effect(
    ChainClients,
    Effect.gen(function* () {
      const agent = yield* Effect.acquireRelease(
        Effect.sync(() => new Agent({ keepAliveTimeout: 4_000 })),
        // Whatever is still in flight was asked by a fiber already interrupted: nothing waits for it.
        (agent) => Effect.promise(() => agent.destroy()),
      );
      const transports = new Map<number, ChainTransport>();
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const transport of transports.values()) transport.stop();
        }),
      );
      const context = yield* Effect.context<never>();
      const onLag = (change: LagChange) => {
        const details = {
          chain: change.chainId,
          rpc_url: `#${change.index} ${change.host}`,
          head: String(change.head),
          best_head: String(change.best),
        };
        Effect.runForkWith(context)(
          change.lagging
            ? Effect.logWarning("RPC URL set aside: its head trails the chain's other URLs").pipe(
                Effect.annotateLogs(details),
              )
            : Effect.logInfo("RPC URL caught up: in use again").pipe(Effect.annotateLogs(details)),
        );
      };
      const fetchFn = fetchOver(agent);
      return makeChainClients((chain) => {
        const existing = transports.get(chain.id);
        if (existing) return existing;
        const created = chainTransport(chain, { fetchFn, onLag });
        transports.set(chain.id, created);
        return created;
      });
    }),
  );
}

const makeChainClients = (transportOf: (chain: ResolvedChain) => ChainTransport): ChainClients["Service"] => {
  const clients = new Map<number, PublicClient<Transport, Chain>>();
  const client = (chain: ResolvedChain) => {
    const existing = clients.get(chain.id);
    if (existing) return existing;
    const created = createPublicClient({
      chain: defineChain({
        id: chain.id,
        name: chain.name,
        nativeCurrency: nativeCurrencyOf(chain),
        rpcUrls: { default: { http: [...chain.rpc.http] } },
      }),
      transport: transportOf(chain).transport,
    });
    clients.set(chain.id, created);
    return created;
  };
  const rpc = <A>(chain: ResolvedChain, what: string, f: () => Promise<A>) =>
    Effect.tryPromise({
      try: f,
      catch: (error) => new ChainUnavailable({ chainId: chain.id, message: `${what}: ${firstLine(error)}` }),
    });
  const latestBlock = (chain: ResolvedChain) =>
    rpc(chain, "latest block", () => client(chain).getBlock({ blockTag: "latest" })).pipe(
      Effect.map((block) => ({ number: block.number, timestamp: Number(block.timestamp) })),
    );
  const latestTime = (chain: ResolvedChain) => Effect.map(latestBlock(chain), (block) => block.timestamp);
  const simulateEscrow = (
    chain: ResolvedChain,
    from: Hex,
    functionName: EscrowFunction,
    args: readonly unknown[],
  ): Effect.Effect<void, EscrowRevert | ChainUnavailable> =>
    Effect.tryPromise({
      try: () =>
        client(chain).call({
          account: from,
          to: chain.escrow.address,
          data: escrowCallData(functionName, args),
          blockTag: "pending",
        }),
      catch: (error) => error,
    }).pipe(
      Effect.asVoid,
      Effect.catch((error): Effect.Effect<never, EscrowRevert | ChainUnavailable> => {
        const revert = revertOf(error);
        return revert === undefined
          ? Effect.fail(new ChainUnavailable({ chainId: chain.id, message: firstLine(error) }))
          : Effect.fail(new EscrowRevert({ ...revert, message: firstLine(error) }));
      }),
    );
  // Chains whose node refused eth_createAccessList: measured with eth_estimateGas from then on.
  const refusingAccessLists = new Set<number>();
  const measureCall = (chain: ResolvedChain, call: MeasuredCall) =>
    rpc(chain, "gas", () => measureGas(client(chain), chain, call, refusingAccessLists));
  const measureEscrow = (
    chain: ResolvedChain,
    from: Hex,
    functionName: EscrowFunction,
    args: readonly unknown[],
    at: "pending" | "latest" = "pending",
  ) =>
    rpc(chain, `gas of ${functionName}`, () =>
      measureGas(
        client(chain),
        chain,
        { from, to: chain.escrow.address, data: escrowCallData(functionName, args), at },
        refusingAccessLists,
      ),
    );
  const simulateOutcome = (
    chain: ResolvedChain,
    from: Hex,
    functionName: EscrowFunction,
    args: readonly unknown[],
  ) =>
    simulateEscrow(chain, from, functionName, args).pipe(
      Effect.as(undefined),
      Effect.catchTag("EscrowRevert", (revert: EscrowRevert) => Effect.succeed(revert)),
    );
  return {
    client,
    latestTime,
    latestBlock,
    simulateEscrow,
    measureEscrow,
    measureCall,
    simulateOutcome,
    rpc,
    rpcUrls: (chain: ResolvedChain) => transportOf(chain).nodes(),
  };
};

/**
 * The revert in a failed call's data (viem nests the data in the cause chain): one of the escrow's
 * custom errors, or a token's `Error(string)` with its reason (decodeErrorResult knows `Error` and
 * `Panic` besides the ABI's own).
 */
const revertOf = (error: unknown): { errorName: string; reason?: string } | undefined => {
  if (!(error instanceof BaseError)) return undefined;
  const data = (
    error.walk((e) => typeof (e as { data?: unknown }).data === "string") as { data?: unknown } | null
  )?.data;
  if (typeof data !== "string" || !data.startsWith("0x") || data.length < 10) return undefined;
  try {
    // Typed by the ABI's own errors; `Error` and `Panic` are decoded too.
    const decoded: { readonly errorName: string; readonly args?: readonly unknown[] | undefined } =
      decodeErrorResult({ abi: MandateEscrowAbi, data: data as Hex });
    const [reason] = decoded.args ?? [];
    return decoded.errorName === "Error" && typeof reason === "string"
      ? { errorName: decoded.errorName, reason }
      : { errorName: decoded.errorName };
  } catch {
    return undefined; // not an error the escrow or a token reverts with
  }
};
