/**
 * The charge engine, shared by the API (a batch of one) and billing (a period boundary): each request is
 * checked against its mandate (locked, in id order), each chain's charges are simulated together and
 * sent as one `chargeMany` transaction through the relayer, which pays the gas. A charge that would fail
 * spends nothing: it is refused (the merchant's mistake, 400) or recorded failed (the customer's
 * situation, with an event). The escrow's batch is all-or-nothing, so a batch that would revert is
 * split in halves until the charges that fail stand alone (chains/batch-isolation.ts). Nothing is
 * simulated or sent for a token its issuer has paused (503 `token_paused`, nothing recorded).
 */
import { Array as Arr, Context, Effect, Layer, Result } from "effect";
import type { SqlError } from "effect/sql";
import type { Hex } from "viem";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import { isolateFailures } from "../chains/batch-isolation.ts";
import { tokenRefusal } from "../chains/blocked-transfers.ts";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { relayerUnavailable, tokenPaused, unavailable } from "../chains/unavailable.ts";
import type { ErrorCode } from "../error-codes.ts";
import { InvalidRequest, invalidParam, type NotFound, resourceMissing, type Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal, parseDecimal } from "../money/decimal.ts";
import { ChargeFailureEvents } from "./charge-failure-events.ts";
import { chargePurpose, onchainChargeId } from "./charge-ids.ts";
import { explainChargeRevert } from "./charge-reverts.ts";
import { ChargeStore } from "./charge-store.ts";

/** A charge's amount: base units (billing), or a decimal the merchant sent (parsed with the mandate's token). */
export type ChargeAmount = { readonly units: bigint } | { readonly decimal: string };

export interface ChargeRequest {
  readonly scope: MerchantScope;
  readonly mandateId: string;
  readonly amount: ChargeAmount;
}

/** The id of each charge recorded (sent, or failed for the customer), or why it was refused. */
export type ChargeOutcome = Result.Result<string, InvalidRequest | NotFound>;

/** A charge request that passed the service's checks, ready to simulate and send. */
interface Checked {
  readonly mandate: MandateRow;
  readonly chain: ResolvedChain;
  readonly amount: bigint;
  readonly period: number;
  readonly onchainId: Hex;
}

const chargeManyArgs = (batch: ReadonlyArray<Checked>) => [
  batch.map((c) => c.onchainId),
  batch.map((c) => c.amount),
];

const alreadyCharged = (mandate: MandateRow, period: number, chargeId: string | undefined) =>
  new InvalidRequest({
    code: "period_already_charged",
    message: `This mandate was already charged for period ${period}${chargeId ? ` (${chargeId})` : ""}, which runs until ${new Date(periodStart(mandate.anchor, period + 1) * 1000).toISOString()}. A mandate is charged at most once per period.`,
    param: null,
  });

const refusal = (code: ErrorCode, message: string, param: string | null = null) =>
  new InvalidRequest({ code, message, param });

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const relayer = yield* Relayer;
  const mandateStore = yield* MandateStore;
  const chargeStore = yield* ChargeStore;
  const gasCosts = yield* GasCosts;
  const failureEvents = yield* ChargeFailureEvents;
  const tokenStates = yield* TokenStates;

  /** Checks a request against its mandate, locked by `send`; whether the period is free is checked later. */
  const check = (
    request: ChargeRequest,
    mandate: MandateRow | undefined,
    chainTime: (chain: ResolvedChain) => Effect.Effect<number, Unavailable>,
  ): Effect.Effect<Checked, InvalidRequest | NotFound | Unavailable> =>
    Effect.gen(function* () {
      if (mandate === undefined) return yield* resourceMissing("mandate", request.mandateId);
      const chain = registry.byId(mandate.chain_id);
      if (!chain) return yield* Effect.die(new Error(`mandate ${mandate.id} is on an unknown chain`));
      const token = tokenOf(chain, mandate.token_address);
      if (token === undefined)
        return yield* Effect.die(new Error(`mandate ${mandate.id} has an unknown token`));
      yield* tokenStates.guard(chain, token.address);
      const given = request.amount;
      let amount: bigint;
      if ("units" in given) amount = given.units;
      else {
        const parsed = parseDecimal(given.decimal, token.decimals, 2n ** 256n - 1n);
        if (Result.isFailure(parsed))
          return yield* invalidParam("amount_decimal", `amount_decimal ${parsed.failure.message}.`);
        amount = parsed.success;
      }
      if (amount > BigInt(mandate.cap))
        return yield* refusal(
          "mandate_cap_exceeded",
          `The amount ${formatDecimal(amount, token.decimals)} exceeds the mandate's cap of ${formatDecimal(BigInt(mandate.cap), token.decimals)} ${token.symbol} per period.${mandate.pending_cap === null ? ` Raise it with POST /v1/mandates/${mandate.id} (cap_decimal): the customer signs the new cap at the mandate's authorization_url.` : ` The raise to ${formatDecimal(BigInt(mandate.pending_cap), token.decimals)} waits for the customer's signature at the mandate's authorization_url.`}`,
          "amount_decimal",
        );
      if (mandate.status === "revoked")
        return yield* refusal(
          "mandate_revoked",
          "The customer revoked this mandate; it cannot be charged again.",
        );
      if (mandate.onchain_id === null)
        return yield* refusal(
          "mandate_not_authorized",
          "The customer has not signed this mandate yet: send them to its authorization_url.",
        );
      if (relayer.address(chain.id) === undefined) return yield* relayerUnavailable("send charges");
      if (!relayer.actsFor(chain, mandate.operator_address))
        return yield* refusal(
          "mandate_not_chargeable",
          "This mandate names another operator than this service, so the service cannot charge it.",
        );
      const period = periodIndexAt(mandate.anchor, yield* chainTime(chain));
      if (period === undefined)
        return yield* refusal(
          "mandate_not_started",
          `The mandate's first period starts at ${mandate.anchor} (unix seconds).`,
        );
      return { mandate, chain, amount, period, onchainId: mandate.onchain_id as Hex };
    });

  /** The call that charges `batch`: `charge` for one, `chargeMany` for more. */
  const chargeCall = (batch: ReadonlyArray<Checked>) => {
    const [only] = batch;
    return batch.length === 1 && only !== undefined
      ? { functionName: "charge" as const, args: [only.onchainId, only.amount] }
      : { functionName: "chargeMany" as const, args: chargeManyArgs(batch) };
  };

  /** Records one chain's checked charges and sends those that would succeed in one transaction. */
  const sendChain = (chain: ResolvedChain, batch: ReadonlyArray<Checked>) =>
    Effect.gen(function* () {
      // Usually the whole batch succeeds: one run of it gives the relayer its gas too. Otherwise the
      // simulations find which charges fail, and the relayer measures what is left.
      // Simulated from the sender: the relayer the operator named (or the operator itself).
      const sender = relayer.address(chain.id) ?? (batch[0]?.mandate.operator_address as Hex);
      const isolated = yield* isolateFailures(chain, sender, batch, chargeCall).pipe(
        Effect.mapError(unavailable),
      );
      const failures = new Map(isolated.failing.map(({ item, revert }) => [item, revert] as const));
      // A paused token is nobody's failure: the request is refused whole and nothing is recorded.
      for (const { item, revert } of isolated.failing)
        if (tokenRefusal(revert) === "paused") {
          yield* tokenStates.notePaused(chain, item.mandate.token_address);
          return yield* tokenPaused(chain, item.mandate.token_address);
        }
      const outcomes: ChargeOutcome[] = [];
      const sending: { checked: Checked; id: string }[] = [];
      for (const checked of batch) {
        const failure = failures.get(checked);
        if (failure === undefined) {
          const id = yield* newId("charge");
          sending.push({ checked, id });
          outcomes.push(Result.succeed(id));
          continue;
        }
        const classified = yield* explainChargeRevert(chain, checked.mandate, failure);
        if (classified.kind === "refuse") {
          outcomes.push(
            Result.fail(
              classified.code === "period_already_charged"
                ? alreadyCharged(checked.mandate, checked.period, undefined)
                : refusal(classified.code, classified.message),
            ),
          );
          continue;
        }
        const id = yield* chargeStore.insertFailed({
          scope: { merchantId: checked.mandate.merchant_id, livemode: checked.mandate.livemode },
          mandateId: checked.mandate.id,
          chainId: chain.id,
          amount: checked.amount,
          period: checked.period,
          failureCode: classified.failureCode,
          message: classified.message,
        });
        yield* failureEvents.failed(checked.mandate, id, classified.failureCode);
        outcomes.push(Result.succeed(id));
      }
      if (!Arr.isReadonlyArrayNonEmpty(sending)) return outcomes;
      const single = sending[0];
      const call = chargeCall(sending.map((s) => s.checked));
      const purpose =
        sending.length === 1
          ? chargePurpose(
              chain.id,
              onchainChargeId(single.checked.onchainId, single.checked.period),
              single.id,
            )
          : `charges:${chain.id}:${yield* newId("request")}`;
      yield* chargeStore.insertPending(
        sending.map(({ checked, id }) => ({
          scope: { merchantId: checked.mandate.merchant_id, livemode: checked.mandate.livemode },
          id,
          mandateId: checked.mandate.id,
          chainId: chain.id,
          amount: checked.amount,
          period: checked.period,
          onchainId: onchainChargeId(checked.onchainId, checked.period),
          relayerPurpose: purpose,
        })),
      );
      yield* mandateStore.recordLatestCharges(
        sending.map(({ checked, id }) => ({ mandateId: checked.mandate.id, chargeId: id })),
      );
      // Recorded in this transaction; broadcast once it commits (never for a rollback).
      yield* relayer
        .submit(chain.id, {
          to: chain.escrow.address,
          data: escrowCallData(call.functionName, call.args),
          purpose,
          ...(isolated.gasUsed === undefined ? {} : { gasUsed: isolated.gasUsed }),
          merchants: sending.map((s) => s.checked.mandate.merchant_id),
        })
        .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
      yield* gasCosts.carries(
        chain.id,
        purpose,
        "charge",
        "charge",
        sending.map((s) => s.id),
      );
      return outcomes;
    }).pipe(Effect.provideService(ChainClients, clients), Effect.provideService(TokenStates, tokenStates));

  /** Each request's outcome, in order. Inside a transaction (the mandates stay locked until it ends). */
  const send = (
    requests: ReadonlyArray<ChargeRequest>,
  ): Effect.Effect<ReadonlyArray<ChargeOutcome>, Unavailable | SqlError.SqlError> =>
    Effect.gen(function* () {
      const times = new Map<number, number>();
      const chainTime = (chain: ResolvedChain) => {
        const known = times.get(chain.id);
        return known !== undefined
          ? Effect.succeed(known)
          : clients.latestTime(chain).pipe(
              Effect.tap((now) => Effect.sync(() => times.set(chain.id, now))),
              Effect.mapError(unavailable),
            );
      };
      const locked = new Map((yield* mandateStore.lockMany(requests)).map((row) => [row.id, row] as const));
      const seen = new Set<string>();
      const screened = yield* Effect.forEach(requests, (request) =>
        (seen.has(request.mandateId)
          ? Effect.fail(
              refusal("period_already_charged", "Another charge of this mandate is in the same batch."),
            )
          : Effect.andThen(
              Effect.sync(() => seen.add(request.mandateId)),
              check(request, locked.get(request.mandateId), chainTime),
            )
        ).pipe(
          Effect.map((checked) => ({ checked })),
          Effect.catchTags({
            InvalidRequest: (refused) => Effect.succeed({ refused }),
            NotFound: (refused) => Effect.succeed({ refused }),
          }),
        ),
      );
      const taken = yield* chargeStore.takenPeriods(
        screened.flatMap((item) =>
          "checked" in item ? [{ mandateId: item.checked.mandate.id, period: item.checked.period }] : [],
        ),
      );
      const outcomes: ChargeOutcome[] = [];
      const byChain = new Map<number, { index: number; checked: Checked }[]>();
      for (const [index, item] of screened.entries()) {
        if ("refused" in item) {
          outcomes[index] = Result.fail(item.refused);
          continue;
        }
        const { mandate, period, chain } = item.checked;
        const takenBy = taken.get(`${mandate.id}:${period}`);
        if (takenBy !== undefined || (mandate.last_charged_period ?? -1) >= period) {
          outcomes[index] = Result.fail(alreadyCharged(mandate, period, takenBy));
          continue;
        }
        const group = byChain.get(chain.id) ?? [];
        group.push({ index, checked: item.checked });
        byChain.set(chain.id, group);
      }
      for (const group of byChain.values()) {
        const [first] = group;
        if (!first) continue;
        const sent = yield* sendChain(
          first.checked.chain,
          group.map((g) => g.checked),
        );
        for (const [i, { index }] of group.entries()) outcomes[index] = sent[i] as ChargeOutcome;
      }
      return outcomes;
    });

  return { send };
});

export class ChargeBatches extends Context.Service<ChargeBatches>()("ChargeBatches", { make }) {
  static readonly layer = Layer.effect(ChargeBatches, make);
}
