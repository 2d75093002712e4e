/**
 * A chain fact as the relay reads it from the indexer's `fact` table. A fact is keyed by what it reports
 * (a charge by its chain and charge id, an authorization by its mandate and nonce), not by the log that
 * carried it: a reorg that mines the same charge again in another block can change its log index, which
 * with 0 confirmations would have reported it twice. Facts still carry their block, transaction hash
 * and log index for finance, and their mandate's parties (customer, payee, token), so that the relay and
 * the reconciliation need no join with another Ponder table.
 */
import { Schema } from "effect";

/**
 * A fact as stored by the indexer (numeric columns read as text). Everything that changes over a
 * mandate's life (terms of a signature, a charge's period and hold) and a payment's (its deposit address,
 * its hold) comes from the fact's own details.
 */
export const FactRow = Schema.Struct({
  key: Schema.String,
  kind: Schema.Literals([
    "mandate.authorized",
    "mandate.revoked",
    "mandate.cap_lowered",
    "charge.succeeded",
    "charge.released",
    "charge.returned",
    "payment.received",
    "payment.released",
    "payment.returned",
  ]),
  chain_id: Schema.Number,
  block_number: Schema.String,
  block_hash: Schema.String,
  timestamp: Schema.String,
  tx_hash: Schema.String,
  log_index: Schema.Number,
  /** mandate.* and charge.* facts. */
  mandate_id: Schema.NullOr(Schema.String),
  charge_id: Schema.NullOr(Schema.String),
  /** payment.* facts. */
  payment_id: Schema.NullOr(Schema.String),
  amount: Schema.NullOr(Schema.String),
  customer: Schema.NullOr(Schema.String),
  payee: Schema.String,
  token: Schema.String,
  details: Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Number])),
});
export type FactRow = typeof FactRow.Type;
