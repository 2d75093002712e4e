/**
 * Test funds, for the test-mode helpers (fund a mandate's wallet, pay a payment): the relayer sends the
 * token's `mint(to, amount)` and the helper waits for it. It works where the token lets the relayer mint:
 * Circle's USDC on a local chain, whose stack makes the relayer a minter, and our own test token; on any
 * other chain the token refuses and the helper answers that test funds cannot be minted there.
 */
import { Duration, Effect } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { encodeFunctionData, type Hex, parseAbi } from "viem";
import type { ResolvedChain } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { unavailable as refusal } from "../chains/unavailable.ts";
import { outsideTransaction } from "../db/client.ts";
import type { ErrorCode } from "../error-codes.ts";
import { InvalidRequest, Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";

const mintAbi = parseAbi(["function mint(address to, uint256 amount) returns (bool)"]);
const WAIT = Duration.seconds(30);

const unavailable = (message: string) => new Unavailable({ code: "chain_unavailable", message });

/**
 * Mints `amount` of `token` to `to` through the relayer and answers the mined transaction's hash. The
 * transaction is committed on its own (outside the request's), so the helper's answer never waits on it.
 * `refusedCode` names the caller's error when the token refuses to mint.
 */
export const mintTestFunds = (
  chain: ResolvedChain,
  token: Hex,
  to: Hex,
  amount: bigint,
  refusedCode: ErrorCode,
  /**
   * The object the test funds are for: the mint's gas is accounted to it (gas-costs.ts) and counts
   * against its merchant's share of the relayer's budget (relayer-shares.ts).
   */
  source: { readonly object: "mandate" | "payment"; readonly id: string; readonly merchantId: string },
): Effect.Effect<
  Hex,
  InvalidRequest | Unavailable | SqlError.SqlError,
  Relayer | SqlClient.SqlClient | TokenStates | GasCosts
> =>
  Effect.gen(function* () {
    yield* (yield* TokenStates).guard(chain, token);
    const relayer = yield* Relayer;
    const sql = yield* SqlClient.SqlClient;
    const gasCosts = yield* GasCosts;
    const purpose = `fund:${yield* newId("request")}`;
    const data = encodeFunctionData({ abi: mintAbi, functionName: "mint", args: [to, amount] });
    const mined = yield* outsideTransaction(
      Effect.gen(function* () {
        // The mint and what it carries commit together, before its receipt can be recorded.
        yield* sql.withTransaction(
          Effect.andThen(
            relayer.submit(chain.id, { to: token, data, purpose, merchants: [source.merchantId] }),
            gasCosts.carries(chain.id, purpose, "test_funding", source.object, [source.id]),
          ),
        );
        return yield* relayer.waitMined(chain.id, purpose, WAIT);
      }),
    ).pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.catchTag(
        "RelayerError",
        (error): Effect.Effect<never, InvalidRequest | Unavailable> =>
          error.reason === "simulation_failed"
            ? Effect.fail(
                new InvalidRequest({
                  code: refusedCode,
                  message: `The token on chain ${chain.id} does not let this service mint test funds (${error.message}).`,
                  param: null,
                }),
              )
            : // The budget or the balance floor keep their own codes; anything else is the chain's.
              Effect.fail(refusal(error)),
      ),
    );
    if (mined === undefined || mined.status !== "mined")
      return yield* unavailable(
        "The minting transaction was not mined in time. Retry with a new Idempotency-Key.",
      );
    return mined.hash;
  });
