/**
 * The one writer of `billing.portal_sessions`: a customer portal link, scoped to one merchant, mode and
 * customer until it expires. Only the SHA-256 of the link's token is kept (portal-sessions.ts).
 */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { relation, selectRows } from "../db/query.ts";
import { theRow } from "../db/rows.ts";
import type { MerchantScope } from "../merchants/scope.ts";

export const PortalSessionRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  customer: Schema.String,
  return_url: Schema.NullOr(Schema.String),
  subscription_cancel: Schema.Boolean,
  expires_at: Schema.Date,
  created_at: Schema.Date,
});
export type PortalSessionRow = typeof PortalSessionRow.Type;

const PORTAL_SESSIONS = relation({
  from: "billing.portal_sessions p",
  alias: "p",
  columns:
    "p.id, p.merchant_id, p.livemode, p.customer, p.return_url, p.subscription_cancel, p.expires_at, p.created_at",
  row: PortalSessionRow,
});

export interface NewPortalSession {
  readonly id: string;
  readonly scope: MerchantScope;
  readonly customer: string;
  readonly tokenHash: string;
  readonly returnUrl: string | null;
  readonly subscriptionCancel: boolean;
  readonly createdAt: Date;
  readonly expiresAt: Date;
}

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  return {
    insert: (session: NewPortalSession) =>
      sql`INSERT INTO billing.portal_sessions AS p ${sql.insert({
        id: session.id,
        merchant_id: session.scope.merchantId,
        livemode: session.scope.livemode,
        customer: session.customer,
        token_hash: session.tokenHash,
        return_url: session.returnUrl,
        subscription_cancel: session.subscriptionCancel,
        expires_at: session.expiresAt,
        created_at: session.createdAt,
      })} RETURNING ${PORTAL_SESSIONS.columns}`.pipe(
        Effect.flatMap(PORTAL_SESSIONS.decode),
        Effect.flatMap(theRow(`new portal session ${session.id}`)),
      ),
    /** The session whose token hashes to `tokenHash`, expired or not; undefined when there is none. */
    byTokenHash: (tokenHash: string) =>
      selectRows(sql, PORTAL_SESSIONS, [sql`p.token_hash = ${tokenHash}`]).pipe(
        Effect.map((rows) => rows[0]),
      ),
  };
});

export class PortalSessionStore extends Context.Service<PortalSessionStore>()("PortalSessionStore", {
  make,
}) {
  static readonly layer = Layer.effect(PortalSessionStore, make);
}
