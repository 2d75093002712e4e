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

export const applyFact = (fact: FactRow, context: FactContext) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const { chain, mandates, charges } = context;
    const mandateRow = yield* sql<{ id: string }>`SELECT id FROM billing.mandates
      WHERE chain_id = ${chain.id} AND onchain_id = ${fact.mandate_id} FOR UPDATE`;
    let mandateId = mandateRow[0]?.id;

    const event = (object: unknown): NewEvent => {
      const created = Number(fact.timestamp);
      return {
        id: eventIdForFact(fact.key, created),
        merchantId: context.merchantId,
        livemode: chain.livemode,
        type: fact.kind,
        created,
        object,
        key: fact.key,
        onchain: {
          chainId: chain.id,
          blockNumber: BigInt(fact.block_number),
          txHash: fact.tx_hash,
          logIndex: fact.log_index,
        },
      };
    };

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
