/**
 * SEAM (issue 44): the portal's gasless revocation, wired at the merge of the `cap-changes` branch.
 *
 * The customer signs the escrow's EIP-712 `Revoke(mandateId, deadline)` and the relayer submits
 * `revokeWithSignature`. That branch builds both halves as `Revocations` in
 * `service/mandates/revocations.ts`: `request(mandate)` (the typed data, a `revocation_request`) and
 * `submit(mandate, {deadline, signature})` (checks the signature as the escrow will, counts against the
 * mandate's daily limit of relayed transactions, and relays it: a pending `revocation`). The portal
 * reaches them only through this port, so the merge is one layer:
 *
 *   static readonly layer = Layer.effect(PortalRevocations, Effect.gen(function* () {
 *     const revocations = yield* Revocations;
 *     return { available: true, request: revocations.request, submit: revocations.submit };
 *   }));
 *
 * in place of `PortalRevocations.notYetWired` in layers.ts (it takes `Revocations` from the layers
 * below it); the three schemas below then become re-exports of that module's `RevocationRequestObject`,
 * `RevocationSubmission` and `RevocationObject` (same shapes), and `PORTAL_REVOCATION_WIRED` becomes
 * true (it runs the e2e revocation test).
 *
 * Until then a deployment does not offer revocation on the portal (`mandate_revoke.enabled` false, no
 * button) and the two endpoints answer 503 `revocation_unavailable`: nothing is pretended.
 */
import { Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { SignatureHex } from "../chains/wallet-signatures.ts";
import { type InvalidRequest, type NotFound, type RateLimited, Unavailable } from "../errors.ts";
import { TypedDataJson } from "../mandates/authorization-requests.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";

/** True once `Revocations` is wired in (see above); the e2e revocation test runs then. */
export const PORTAL_REVOCATION_WIRED = false;

export const RevocationRequestObject = Schema.Struct({
  object: Schema.Literal("revocation_request"),
  mandate: Schema.String,
  customer_address: Schema.String.annotate({ description: "The wallet that must sign" }),
  typed_data: TypedDataJson.annotate({ description: "For eth_signTypedData_v4: the escrow's Revoke" }),
}).annotate({ identifier: "RevocationRequest" });
export type RevocationRequestObject = typeof RevocationRequestObject.Type;

export const RevocationSubmission = Schema.Struct({
  deadline: Schema.Union([
    Schema.String.check(Schema.isPattern(/^\d{1,20}$/)),
    Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  ]).annotate({ description: "The signed message's deadline, as handed out" }),
  signature: SignatureHex,
}).annotate({ identifier: "RevocationSubmission" });
export type RevocationSubmission = typeof RevocationSubmission.Type;

export const RevocationObject = Schema.Struct({
  object: Schema.Literal("revocation"),
  mandate: Schema.String,
  status: Schema.Literal("pending").annotate({
    description: "Sent by the service; mandate.revoked follows once the chain confirms it",
  }),
  transaction: Schema.String,
}).annotate({ identifier: "Revocation" });
export type RevocationObject = typeof RevocationObject.Type;

const notAvailable = new Unavailable({
  code: "revocation_unavailable",
  message:
    "Revoking without gas is not available on this deployment yet. You can revoke the mandate from your wallet by calling the escrow's revoke.",
});

export type RevocationFailure = InvalidRequest | Unavailable | RateLimited | NotFound | SqlError.SqlError;

export class PortalRevocations extends Context.Service<
  PortalRevocations,
  {
    /** Whether this deployment revokes on the customer's signature (the portal offers it only then). */
    readonly available: boolean;
    readonly request: (mandate: MandateRow) => Effect.Effect<RevocationRequestObject, RevocationFailure>;
    readonly submit: (
      mandate: MandateRow,
      input: RevocationSubmission,
    ) => Effect.Effect<RevocationObject, RevocationFailure>;
  }
>()("PortalRevocations") {
  /** SEAM: replaced by the layer over `Revocations` at the merge of `cap-changes` (see above). */
  static readonly notYetWired = Layer.succeed(PortalRevocations, {
    available: false,
    request: () => Effect.fail(notAvailable),
    submit: () => Effect.fail(notAvailable),
  });
}
