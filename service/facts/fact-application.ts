/**
 * Applies confirmed chain facts to the merchant's records and returns the events that report them,
 * each carrying the record as it stands after the fact (a mandate for mandate.*, a charge for charge.*).
 * A fact raises one event of its own kind, except that a cap change raises `mandate.cap_changed`: for a
 * re-signature that changed the cap, besides its `mandate.authorized` (keyed apart, so both are once);
 * for `mandate.cap_lowered`, instead.
 * Runs inside the relay's transaction, so records and events change together. Records are written by
 * their owners (mandate-store.ts, charge-store.ts).
 *
 * A mandate signed directly on chain to a merchant's payout address (not opened through the API) is
 * recorded the first time it is seen (`origin: "chain"`), and so are its charges: every event then
 * refers to an API object with an id.
 */
import { Context, Effect, Layer } from "effect";
import type { SqlError } from "effect/sql";
import type { Hex } from "viem";
import type { ResolvedChain } from "../chains/config.ts";
import type { ChainPosition, Succeeded } from "../charges/charge-store.ts";
import { ChargeStore } from "../charges/charge-store.ts";
import { Charges } from "../charges/charges.ts";
import { eventIdForFact } from "../events/event-ids.ts";
import type { NewEvent } from "../events/outbox.ts";
import { type AuthorizedTerms, MandateStore } from "../mandates/mandate-store.ts";
import { Mandates } from "../mandates/mandates.ts";
import { saltOf } from "../mandates/terms.ts";
import { type PaymentFact, PaymentFacts } from "../payments/payment-facts.ts";
import type { FactRow } from "./fact-row.ts";

/** Whose fact it is (by payee) and on which chain. */
export interface FactOwner {
  readonly merchantId: string;
  readonly chain: ResolvedChain;
}

const detailNumber = (fact: FactRow, name: string) => Number(fact.details[name] ?? 0);
const detailText = (fact: FactRow, name: string) => String(fact.details[name] ?? "0");

const positionOf = (fact: FactRow): ChainPosition => ({
  blockNumber: fact.block_number,
  blockHash: fact.block_hash,
  txHash: fact.tx_hash,
  logIndex: fact.log_index,
  timestamp: fact.timestamp,
});

const succeededOf = (fact: FactRow, chargeId: string): Succeeded => ({
  ...positionOf(fact),
  chargeId,
  amount: fact.amount ?? "0",
  period: detailNumber(fact, "period"),
  releaseAt: detailNumber(fact, "release_at"),
});

const authorizedTerms = (fact: FactRow): AuthorizedTerms => ({
  customer: fact.customer as Hex,
  nonce: detailText(fact, "nonce"),
  approval: detailText(fact, "approval"),
  cap: detailText(fact, "cap"),
  approvalPeriods: detailNumber(fact, "approval_periods"),
  operator: detailText(fact, "operator") as Hex,
  holdSeconds: detailNumber(fact, "hold_seconds"),
  authorizedAt: Number(fact.timestamp),
});

/** The event type a mandate or charge fact raises (a cap change by either way is one type). */
const eventTypeOf = (kind: MandateFactKind) =>
  kind === "mandate.cap_lowered" ? "mandate.cap_changed" : kind;

/**
 * The event that reports a mandate or charge fact, carrying `object` (the record after the fact); a
 * second event of the same fact (`also`) is keyed apart and ordered after the first.
 */
const factEvent = (
  fact: FactRow & { readonly kind: MandateFactKind },
  owner: FactOwner,
  object: unknown,
  also?: "mandate.cap_changed",
): NewEvent => {
  const created = Number(fact.timestamp);
  const key = also === undefined ? fact.key : `${fact.key}:${also}`;
  return {
    id: eventIdForFact(key, created, also === undefined ? 0 : 1),
    merchantId: owner.merchantId,
    livemode: owner.chain.livemode,
    type: also ?? eventTypeOf(fact.kind),
    created,
    object,
    key,
    onchain: {
      chainId: owner.chain.id,
      blockNumber: BigInt(fact.block_number),
      txHash: fact.tx_hash,
      logIndex: fact.log_index,
    },
  };
};

type MandateFactKind = Exclude<FactRow["kind"], PaymentFact["kind"]>;
const isPaymentFact = (fact: FactRow): fact is FactRow & { readonly kind: PaymentFact["kind"] } =>
  fact.kind === "payment.received" || fact.kind === "payment.released" || fact.kind === "payment.returned";

/** Why a fact of a merchant's payout address was declined: the relay records it as skipped. */
export const declineReason = (kind: FactRow["kind"]) => {
  switch (kind) {
    case "mandate.authorized":
      return "token_not_accepted";
    case "mandate.revoked":
    case "mandate.cap_lowered":
    case "charge.succeeded":
      return "mandate_unknown";
    case "charge.released":
    case "charge.returned":
      return "charge_unknown";
    case "payment.received":
    case "payment.released":
    case "payment.returned":
      return "payment_unknown";
  }
};

const make = Effect.gen(function* () {
  const mandateStore = yield* MandateStore;
  const chargeStore = yield* ChargeStore;
  const mandates = yield* Mandates;
  const charges = yield* Charges;
  const payments = yield* PaymentFacts;

  type MandateFact = FactRow & { readonly kind: MandateFactKind };
  const mandateEvent = (fact: MandateFact, owner: FactOwner, id: string) =>
    Effect.map(mandateStore.reload(id), (row) => [factEvent(fact, owner, mandates.render(row))]);
  const chargeEvent = (fact: MandateFact, owner: FactOwner, id: string) =>
    Effect.map(chargeStore.reload(id), (row) => [factEvent(fact, owner, charges.render(row))]);

  /**
   * A charge fact's charge not recorded under its chain id: ours, mined after a period boundary under the
   * next period's id (recorded now), or one the chain made without us (another operator, a lost record).
   */
  const resolveUnrecorded = (fact: MandateFact, owner: FactOwner, mandateId: string, onchainId: string) =>
    Effect.gen(function* () {
      const { chain } = owner;
      const sent = yield* chargeStore.lockSentIn(chain.id, mandateId, fact.tx_hash);
      if (sent !== undefined) {
        yield* chargeStore.recordOnchainId(sent, onchainId);
        return sent;
      }
      return yield* chargeStore.insertFromChain({
        scope: { merchantId: owner.merchantId, livemode: chain.livemode },
        mandateId,
        chainId: chain.id,
        onchainId,
        amount: fact.amount ?? "0",
        period: detailNumber(fact, "period"),
      });
    });

  const paymentFactOf = (fact: FactRow & { readonly kind: PaymentFact["kind"] }): PaymentFact => ({
    key: fact.key,
    kind: fact.kind,
    chainId: fact.chain_id,
    blockNumber: fact.block_number,
    blockHash: fact.block_hash,
    timestamp: fact.timestamp,
    txHash: fact.tx_hash,
    logIndex: fact.log_index,
    paymentId: fact.payment_id,
    amount: fact.amount,
    token: fact.token,
    details: fact.details,
  });

  /**
   * Consecutive payment facts of one merchant, each of another deposit address (relay-plan.ts): the keys
   * of those applied and the events they raised (often none).
   */
  const applyPayments = (facts: ReadonlyArray<FactRow>, owner: FactOwner) =>
    payments.applyRun(facts.filter(isPaymentFact).map(paymentFactOf), owner.merchantId);

  /**
   * One fact; the events it raised (a payment fact may raise none), or undefined when it names nothing
   * this merchant has (the relay records it as skipped).
   */
  const apply = (
    fact: FactRow,
    owner: FactOwner,
  ): Effect.Effect<ReadonlyArray<NewEvent> | undefined, SqlError.SqlError> =>
    isPaymentFact(fact)
      ? Effect.map(applyPayments([fact], owner), ({ applied, events }) =>
          applied.has(fact.key) ? events : undefined,
        )
      : applyMandateFact(fact as MandateFact, owner);

  const applyMandateFact = (fact: MandateFact, owner: FactOwner) =>
    Effect.gen(function* () {
      const { chain } = owner;
      if (fact.mandate_id === null || fact.customer === null) return undefined;
      if (fact.kind === "mandate.authorized") {
        const events = yield* applyMandatesAuthorized([fact], owner);
        return events.length === 0 ? undefined : events;
      }
      const mandateId = (yield* mandateStore.lockOnChain(chain.id, [fact.mandate_id]))[0]?.id;
      switch (fact.kind) {
        case "mandate.revoked": {
          if (mandateId === undefined) return undefined;
          yield* mandateStore.recordRevoked(mandateId);
          return yield* mandateEvent(fact, owner, mandateId);
        }
        case "mandate.cap_lowered": {
          if (mandateId === undefined) return undefined;
          yield* mandateStore.recordCapLowered(
            mandateId,
            detailText(fact, "cap"),
            detailText(fact, "approval_left"),
          );
          return yield* mandateEvent(fact, owner, mandateId);
        }
        case "charge.succeeded": {
          if (mandateId === undefined || fact.charge_id === null || fact.amount === null) return undefined;
          const period = detailNumber(fact, "period");
          const chargeId =
            (yield* chargeStore.lockOnChain(chain.id, [fact.charge_id])).get(fact.charge_id) ??
            (yield* resolveUnrecorded(fact, owner, mandateId, fact.charge_id));
          yield* chargeStore.recordSucceeded([succeededOf(fact, chargeId)]);
          yield* mandateStore.recordCharged([
            { mandateId, approvalLeft: detailText(fact, "approval_left"), period, chargeId },
          ]);
          return yield* chargeEvent(fact, owner, chargeId);
        }
        case "charge.released":
        case "charge.returned": {
          if (fact.charge_id === null) return undefined;
          const chargeId = (yield* chargeStore.lockOnChain(chain.id, [fact.charge_id])).get(fact.charge_id);
          if (chargeId === undefined) return undefined;
          yield* chargeStore.recordEnded(
            chargeId,
            fact.kind === "charge.released" ? "released" : "returned",
            positionOf(fact),
          );
          return yield* chargeEvent(fact, owner, chargeId);
        }
      }
    });

  /**
   * Consecutive `mandate.authorized` facts of one merchant, each of another mandate (relay-plan.ts),
   * applied with two statements instead of three per fact. A mandate signed directly on chain to the
   * merchant is recorded first, on its own; one in a token the chain does not list is declined.
   */
  const applyMandatesAuthorized = (facts: ReadonlyArray<FactRow>, owner: FactOwner) =>
    Effect.gen(function* () {
      const { chain } = owner;
      const scope = { merchantId: owner.merchantId, livemode: chain.livemode };
      const signed = facts.filter(
        (fact): fact is MandateFact & { readonly mandate_id: string } =>
          fact.kind === "mandate.authorized" && fact.mandate_id !== null && fact.customer !== null,
      );
      const known = new Map(
        (yield* mandateStore.lockOnChain(
          chain.id,
          signed.map((fact) => fact.mandate_id),
        )).map((row) => [row.onchain_id, row.id] as const),
      );
      const applied: { fact: MandateFact; mandateId: string; terms: AuthorizedTerms }[] = [];
      for (const fact of signed) {
        const terms = authorizedTerms(fact);
        let mandateId = known.get(fact.mandate_id);
        if (mandateId === undefined) {
          if (!chain.tokens.some((t) => t.address.toLowerCase() === fact.token.toLowerCase())) continue;
          mandateId = yield* mandateStore.insertFromChain({
            scope,
            chainId: chain.id,
            onchainId: fact.mandate_id as Hex,
            token: fact.token as Hex,
            payee: fact.payee as Hex,
            anchor: detailNumber(fact, "anchor"),
            salt: saltOf(fact.mandate_id as Hex),
            terms,
          });
        }
        applied.push({ fact, mandateId, terms });
      }
      const rows = new Map(
        (yield* mandateStore.recordAuthorized(applied)).map((row) => [row.id, row] as const),
      );
      return applied.flatMap(({ fact, mandateId }) => {
        const row = rows.get(mandateId);
        if (!row) return [];
        const object = mandates.render(row);
        const previousCap = fact.details.previous_cap;
        const capChanged = previousCap !== undefined && String(previousCap) !== detailText(fact, "cap");
        return capChanged
          ? [factEvent(fact, owner, object), factEvent(fact, owner, object, "mandate.cap_changed")]
          : [factEvent(fact, owner, object)];
      });
    });

  /**
   * Consecutive `charge.succeeded` facts of one merchant, applied together with a few statements instead
   * of five per fact. A charge not recorded under its chain id (mined after a period boundary, or
   * charged by another operator) is resolved first, on its own, in order; the rest is the same batch.
   */
  const applyChargesSucceeded = (facts: ReadonlyArray<FactRow>, owner: FactOwner) =>
    Effect.gen(function* () {
      if (facts.length === 0) return [] as NewEvent[];
      const { chain } = owner;
      const mandateIds = new Map(
        (yield* mandateStore.lockOnChain(
          chain.id,
          facts.flatMap((f) => (f.mandate_id === null ? [] : [f.mandate_id])),
        )).map((row) => [row.onchain_id, row.id] as const),
      );
      const ours = facts.flatMap((fact) => {
        const mandate = mandateIds.get(fact.mandate_id ?? "");
        return mandate === undefined || fact.charge_id === null || fact.amount === null
          ? []
          : [{ fact: fact as MandateFact, mandate, onchainId: fact.charge_id }];
      });
      const chargeIds = yield* chargeStore.lockOnChain(
        chain.id,
        ours.map((f) => f.onchainId),
      );
      const applied: { fact: MandateFact; mandate: string; charge: string }[] = [];
      for (const { fact, mandate, onchainId } of ours)
        applied.push({
          fact,
          mandate,
          charge: chargeIds.get(onchainId) ?? (yield* resolveUnrecorded(fact, owner, mandate, onchainId)),
        });
      yield* chargeStore.recordSucceeded(applied.map(({ fact, charge }) => succeededOf(fact, charge)));
      // A mandate charged twice in the run ends as its last charge left it.
      const latest = new Map(
        applied.map(({ fact, mandate, charge }) => [mandate, { fact, charge }] as const),
      );
      yield* mandateStore.recordCharged(
        [...latest].map(([mandateId, { fact, charge }]) => ({
          mandateId,
          approvalLeft: detailText(fact, "approval_left"),
          period: detailNumber(fact, "period"),
          chargeId: charge,
        })),
      );
      const rows = new Map(
        (yield* chargeStore.reloadMany(applied.map(({ charge }) => charge))).map((row) => [row.id, row]),
      );
      return applied.flatMap(({ fact, charge }) => {
        const row = rows.get(charge);
        return row ? [factEvent(fact, owner, charges.render(row))] : [];
      });
    });

  return { apply, applyChargesSucceeded, applyMandatesAuthorized, applyPayments };
});

export class FactApplication extends Context.Service<FactApplication>()("FactApplication", { make }) {
  static readonly layer = Layer.effect(FactApplication, make);
}
