/**
 * Applies one confirmed chain fact to the merchant's records and returns the event that reports it,
 * carrying the record as it stands after the fact (a mandate for mandate.*, a charge for charge.*).
 * Runs inside the relay's transaction, so records and events change together.
 *
 * A mandate signed directly on chain to a merchant's payout address (not opened through the API) is
 * recorded the first time it is seen (`origin: "chain"`), and so are its charges: every event then
 * refers to an API object with an id.
 */
import { randomBytes } from "node:crypto";
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import { getAddress, type Hex } from "viem";
import type { ResolvedChain } from "../chains/config.ts";
import type { Charges } from "../charges/charges.ts";
import { newId } from "../ids.ts";
import type { Mandates } from "../mandates/mandates.ts";
import { saltOf } from "../mandates/terms.ts";
import { eventIdForFact } from "./event-ids.ts";
import type { FactRow } from "./fact-events.ts";
import type { NewEvent } from "./outbox.ts";

export interface FactContext {
  readonly merchantId: string;
  readonly chain: ResolvedChain;
  readonly mandates: Mandates["Service"];
  readonly charges: Charges["Service"];
}

const detailNumber = (fact: FactRow, name: string) => Number(fact.details[name] ?? 0);
const detailText = (fact: FactRow, name: string) => String(fact.details[name] ?? "0");

/** The event that reports a fact, carrying `object` (the record as it stands after the fact). */
const factEvent = (fact: FactRow, context: FactContext, object: unknown): NewEvent => {
  const created = Number(fact.timestamp);
  return {
    id: eventIdForFact(fact.key, created),
    merchantId: context.merchantId,
    livemode: context.chain.livemode,
    type: fact.kind,
    created,
    object,
    key: fact.key,
    onchain: {
      chainId: context.chain.id,
      blockNumber: BigInt(fact.block_number),
      txHash: fact.tx_hash,
      logIndex: fact.log_index,
    },
  };
};

/** Why a fact of a merchant's payout address yields no event here: the relay records it as skipped. */
export const declineReason = (kind: FactRow["kind"]) => {
  switch (kind) {
    case "mandate.authorized":
      return "token_not_accepted";
    case "mandate.revoked":
    case "charge.succeeded":
      return "mandate_unknown";
    case "charge.released":
    case "charge.returned":
      return "charge_unknown";
  }
};

export const applyFact = (fact: FactRow, context: FactContext) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const { chain, mandates, charges } = context;
    const mandateRow = yield* sql<{ id: string }>`SELECT id FROM billing.mandates
      WHERE chain_id = ${chain.id} AND onchain_id = ${fact.mandate_id} FOR UPDATE`;
    let mandateId = mandateRow[0]?.id;

    const event = (object: unknown): NewEvent => factEvent(fact, context, object);

    switch (fact.kind) {
      case "mandate.authorized": {
        if (mandateId === undefined) {
          const known = chain.tokens.some((t) => t.address.toLowerCase() === fact.token.toLowerCase());
          if (!known) return undefined;
          mandateId = yield* newId("mandate");
          yield* sql`INSERT INTO billing.mandates ${sql.insert({
            id: mandateId,
            merchant_id: context.merchantId,
            livemode: chain.livemode,
            origin: "chain",
            chain_id: chain.id,
            token_address: getAddress(fact.token),
            cap: detailText(fact, "cap"),
            period: "month",
            approval_periods: detailNumber(fact, "approval_periods"),
            payee_address: getAddress(fact.payee),
            operator_address: getAddress(detailText(fact, "operator")),
            hold_seconds: detailNumber(fact, "hold_seconds"),
            anchor: detailNumber(fact, "anchor"),
            salt: saltOf(fact.mandate_id as Hex).toString(),
            authorization_token: randomBytes(24).toString("base64url"),
            status: "active",
            customer_address: getAddress(fact.customer),
            onchain_id: fact.mandate_id,
          })}`;
        }
        yield* sql`UPDATE billing.mandates SET status = 'active', customer_address = ${getAddress(fact.customer)},
            signature_version = ${detailText(fact, "nonce")}, approval_left = ${detailText(fact, "approval")},
            cap = ${detailText(fact, "cap")}, approval_periods = ${detailNumber(fact, "approval_periods")},
            operator_address = ${getAddress(detailText(fact, "operator"))},
            hold_seconds = ${detailNumber(fact, "hold_seconds")},
            authorized_at = to_timestamp(${Number(fact.timestamp)}), updated_at = now()
          WHERE id = ${mandateId}`;
        return event(mandates.render(yield* mandates.reload(mandateId)));
      }
      case "mandate.revoked": {
        if (mandateId === undefined) return undefined;
        yield* sql`UPDATE billing.mandates SET status = 'revoked', updated_at = now() WHERE id = ${mandateId}`;
        return event(mandates.render(yield* mandates.reload(mandateId)));
      }
      case "charge.succeeded": {
        if (mandateId === undefined || fact.charge_id === null || fact.amount === null) return undefined;
        const existing = yield* sql<{ id: string }>`SELECT id FROM billing.charges
          WHERE chain_id = ${chain.id} AND onchain_id = ${fact.charge_id} FOR UPDATE`;
        let chargeId = existing[0]?.id;
        const period = detailNumber(fact, "period");
        if (chargeId === undefined) {
          // Our transaction, mined after a period boundary: the chain charged the next period's id.
          const ours = yield* sql<{ id: string }>`SELECT c.id FROM billing.charges c
            JOIN billing.relayer_transactions r ON r.chain_id = c.chain_id AND r.purpose = c.relayer_purpose
            WHERE c.chain_id = ${chain.id} AND c.mandate_id = ${mandateId} AND c.status = 'pending'
              AND ${fact.tx_hash} = ANY(r.hashes)
            FOR UPDATE OF c`;
          chargeId = ours[0]?.id;
          if (chargeId !== undefined)
            yield* sql`UPDATE billing.charges SET onchain_id = ${fact.charge_id} WHERE id = ${chargeId}`;
        }
        if (chargeId === undefined) {
          chargeId = yield* newId("charge");
          yield* sql`INSERT INTO billing.charges ${sql.insert({
            id: chargeId,
            merchant_id: context.merchantId,
            livemode: chain.livemode,
            mandate_id: mandateId,
            chain_id: chain.id,
            amount: fact.amount,
            period,
            status: "succeeded",
            onchain_id: fact.charge_id,
          })}`;
        }
        yield* sql`UPDATE billing.charges SET status = 'succeeded', amount = ${fact.amount}, period = ${period},
            release_at = ${detailNumber(fact, "release_at")}, block_number = ${fact.block_number},
            block_hash = ${fact.block_hash}, tx_hash = ${fact.tx_hash}, log_index = ${fact.log_index},
            charged_at = ${fact.timestamp}, updated_at = now()
          WHERE id = ${chargeId}`;
        yield* sql`UPDATE billing.mandates SET approval_left = ${detailText(fact, "approval_left")},
            last_charged_period = ${period}, latest_charge = ${chargeId}, updated_at = now(),
            status = CASE WHEN ${detailText(fact, "approval_left")}::numeric = 0 AND status = 'active'
                          THEN 'requires_authorization' ELSE status END
          WHERE id = ${mandateId}`;
        return event(charges.render(yield* charges.reload(chargeId)));
      }
      case "charge.released":
      case "charge.returned": {
        if (fact.charge_id === null) return undefined;
        const existing = yield* sql<{ id: string }>`SELECT id FROM billing.charges
          WHERE chain_id = ${chain.id} AND onchain_id = ${fact.charge_id} FOR UPDATE`;
        const chargeId = existing[0]?.id;
        if (chargeId === undefined) return undefined;
        yield* sql`UPDATE billing.charges SET status = ${fact.kind === "charge.released" ? "released" : "returned"},
            pending_action = NULL, pending_action_purpose = NULL,
            ended_block_number = ${fact.block_number}, ended_tx_hash = ${fact.tx_hash},
            ended_log_index = ${fact.log_index}, ended_at = ${fact.timestamp}, updated_at = now()
          WHERE id = ${chargeId}`;
        return event(charges.render(yield* charges.reload(chargeId)));
      }
    }
  });

/**
 * Applies consecutive `charge.succeeded` facts of one chain together, with a few statements instead of
 * five per fact: the common case, the service's own charges mined under the ids it recorded. When any
 * charge is not recorded under its chain id (mined after a period boundary, or charged by another
 * operator), the facts are applied one by one instead, in order.
 */
export const applyChargesSucceeded = (facts: readonly FactRow[], context: FactContext) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const { chain, charges } = context;
    if (facts.length === 0) return [] as NewEvent[];
    const mandateIds = new Map(
      (yield* sql<{ id: string; onchain_id: string }>`SELECT id, onchain_id FROM billing.mandates
        WHERE chain_id = ${chain.id} AND onchain_id = ANY (${facts.map((f) => f.mandate_id)}::text[])
        ORDER BY id FOR UPDATE`).map((row) => [row.onchain_id, row.id] as const),
    );
    const ours = facts.filter(
      (f) => mandateIds.has(f.mandate_id) && f.charge_id !== null && f.amount !== null,
    );
    const chargeIds = new Map(
      (yield* sql<{ id: string; onchain_id: string }>`SELECT id, onchain_id FROM billing.charges
        WHERE chain_id = ${chain.id} AND onchain_id = ANY (${ours.map((f) => f.charge_id)}::text[])
        ORDER BY id FOR UPDATE`).map((row) => [row.onchain_id, row.id] as const),
    );
    if (ours.some((f) => !chargeIds.has(f.charge_id ?? ""))) {
      const events: NewEvent[] = [];
      for (const fact of facts) {
        const event = yield* applyFact(fact, context);
        if (event) events.push(event);
      }
      return events;
    }
    const applied = ours.map((fact) => ({
      fact,
      mandate: mandateIds.get(fact.mandate_id) as string,
      charge: chargeIds.get(fact.charge_id ?? "") as string,
    }));
    const chargeRows = applied.map(({ fact, charge }) => ({
      id: charge,
      amount: fact.amount,
      period: detailNumber(fact, "period"),
      release_at: detailNumber(fact, "release_at"),
      block_number: fact.block_number,
      block_hash: fact.block_hash,
      tx_hash: fact.tx_hash,
      log_index: fact.log_index,
      charged_at: fact.timestamp,
    }));
    yield* sql`UPDATE billing.charges c SET status = 'succeeded', amount = v.amount, period = v.period,
        release_at = v.release_at, block_number = v.block_number, block_hash = v.block_hash, tx_hash = v.tx_hash,
        log_index = v.log_index, charged_at = v.charged_at, updated_at = now()
      FROM jsonb_to_recordset(${JSON.stringify(chargeRows)}::jsonb) AS v(id text, amount numeric, period int,
        release_at bigint, block_number bigint, block_hash text, tx_hash text, log_index int, charged_at bigint)
      WHERE c.id = ANY (${chargeRows.map((r) => r.id)}::text[]) AND c.id = v.id`;
    // A mandate charged twice in the run ends as its last charge left it.
    const latest = new Map(applied.map(({ fact, mandate, charge }) => [mandate, { fact, charge }] as const));
    const mandateRows = [...latest].map(([id, { fact, charge }]) => ({
      id,
      approval_left: detailText(fact, "approval_left"),
      period: detailNumber(fact, "period"),
      charge,
    }));
    yield* sql`UPDATE billing.mandates m SET approval_left = v.approval_left, last_charged_period = v.period,
        latest_charge = v.charge, updated_at = now(),
        status = CASE WHEN v.approval_left = 0 AND m.status = 'active' THEN 'requires_authorization' ELSE m.status END
      FROM jsonb_to_recordset(${JSON.stringify(mandateRows)}::jsonb) AS v(id text, approval_left numeric,
        period int, charge text)
      WHERE m.id = ANY (${mandateRows.map((r) => r.id)}::text[]) AND m.id = v.id`;
    const rows = new Map(
      (yield* charges.reloadMany(chargeRows.map((r) => r.id))).map((row) => [row.id, row]),
    );
    return applied.flatMap(({ fact, charge }) => {
      const row = rows.get(charge);
      return row ? [factEvent(fact, context, charges.render(row))] : [];
    });
  });
