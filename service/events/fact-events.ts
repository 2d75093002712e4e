/**
 * From a confirmed chain fact to the API event the merchant receives: type, payload, and the merchant
 * it belongs to. Pure: the relay worker (fact-relay.ts) does the reading and writing.
 */
import { Schema } from "effect";
import { formatUnits } from "viem";
import type { ResolvedChain } from "../chains/config.ts";
import { eventIdForFact } from "./event-ids.ts";

/**
 * A fact as stored by the indexer (numeric columns read as text). Everything that changes over a
 * mandate's life (terms of a signature, a charge's period and hold) comes from the fact's own details.
 */
export const FactRow = Schema.Struct({
  key: Schema.String,
  kind: Schema.Literals([
    "mandate.authorized",
    "mandate.revoked",
    "charge.succeeded",
    "charge.released",
    "charge.returned",
  ]),
  chain_id: Schema.Number,
  block_number: Schema.String,
  block_hash: Schema.String,
  timestamp: Schema.String,
  tx_hash: Schema.String,
  log_index: Schema.Number,
  mandate_id: Schema.String,
  charge_id: Schema.NullOr(Schema.String),
  amount: Schema.NullOr(Schema.String),
  customer: Schema.String,
  payee: Schema.String,
  token: Schema.String,
  details: Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Number])),
});
export type FactRow = typeof FactRow.Type;

/** A confirmed fact and the merchant its payee belongs to. */
export interface ConfirmedFact extends FactRow {
  readonly merchant_id: string;
}

export interface OutboxEvent {
  readonly id: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly type: string;
  readonly created: number;
  readonly payload: Record<string, unknown>;
  readonly factKey: string;
  readonly chainId: number;
  readonly blockNumber: bigint;
  readonly txHash: string;
  readonly logIndex: number;
}

const decimal = (amount: string, chain: ResolvedChain, token: string) => {
  const decimals = chain.tokens.find((t) => t.address.toLowerCase() === token)?.decimals;
  return decimals === undefined ? null : formatUnits(BigInt(amount), decimals);
};

export const eventFromFact = (fact: ConfirmedFact, chain: ResolvedChain): OutboxEvent => {
  const created = Number(fact.timestamp);
  const id = eventIdForFact(fact.key, created);
  const onchain = {
    chain: fact.chain_id,
    block_number: Number(fact.block_number),
    block_hash: fact.block_hash,
    transaction_hash: fact.tx_hash,
    log_index: fact.log_index,
  };
  const token = chain.tokens.find((t) => t.address.toLowerCase() === fact.token)?.symbol ?? null;
  const detail = (name: string) => fact.details[name];
  const releaseAt = Number(detail("release_at") ?? 0);
  const object = fact.kind.startsWith("charge.")
    ? {
        object: "charge",
        chain: fact.chain_id,
        mandate: fact.mandate_id,
        charge_id: fact.charge_id,
        period: Number(detail("period")),
        amount: fact.amount,
        amount_decimal: fact.amount === null ? null : decimal(fact.amount, chain, fact.token),
        token,
        token_address: fact.token,
        customer_address: fact.customer,
        payee_address: fact.payee,
        status: {
          "charge.succeeded": releaseAt > 0 ? "held" : "succeeded",
          "charge.released": "released",
          "charge.returned": "returned",
        }[fact.kind as "charge.succeeded" | "charge.released" | "charge.returned"],
        release_at: releaseAt > 0 ? releaseAt : null,
        livemode: chain.livemode,
        onchain,
      }
    : {
        object: "mandate",
        chain: fact.chain_id,
        mandate: fact.mandate_id,
        status: fact.kind === "mandate.revoked" ? "revoked" : "active",
        signature_version: Number(detail("nonce")),
        ...(fact.kind === "mandate.authorized"
          ? {
              cap: String(detail("cap")),
              cap_decimal: decimal(String(detail("cap")), chain, fact.token),
              approval_periods: Number(detail("approval_periods")),
              approval: String(detail("approval")),
            }
          : {}),
        token,
        token_address: fact.token,
        customer_address: fact.customer,
        payee_address: fact.payee,
        livemode: chain.livemode,
        onchain,
      };
  return {
    id,
    merchantId: fact.merchant_id,
    livemode: chain.livemode,
    type: fact.kind,
    created,
    payload: { id, object: "event", type: fact.kind, created, livemode: chain.livemode, data: { object } },
    factKey: fact.key,
    chainId: fact.chain_id,
    blockNumber: BigInt(fact.block_number),
    txHash: fact.tx_hash,
    logIndex: fact.log_index,
  };
};
