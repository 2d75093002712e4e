/**
 * The portal's gasless revocation: the customer signs the escrow's EIP-712 `Revoke(mandateId,
 * deadline)` and the relayer submits `revokeWithSignature` (`Revocations`, mandates/revocations.ts). The
 * portal reaches it through this port, so a deployment without it offers no revocation (no button, 503
 * `revocation_unavailable`) rather than a pretended one.
 */
import { Context, Effect, Layer } from "effect";
import type { SqlError } from "effect/sql";
import { type InvalidRequest, type NotFound, type RateLimited, Unavailable } from "../errors.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";
import {
  type RevocationObject,
  type RevocationRequestObject,
  type RevocationSubmission,
  Revocations,
} from "../mandates/revocations.ts";

/** True once `Revocations` is wired in (see above); the e2e revocation test runs then. */
export const PORTAL_REVOCATION_WIRED = true;

export {
  RevocationObject,
  RevocationRequestObject,
  RevocationSubmission,
} from "../mandates/revocations.ts";

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
  /** The escrow's signed revocation, relayed (mandates/revocations.ts). */
  static readonly layer = Layer.effect(
    PortalRevocations,
    Effect.gen(function* () {
      const revocations = yield* Revocations;
      return { available: true, request: revocations.request, submit: revocations.submit };
    }),
  );
  /** A deployment that does not relay signed revocations (the portal offers none). */
  static readonly notYetWired = Layer.succeed(PortalRevocations, {
    available: false,
    request: () => Effect.fail(notAvailable),
    submit: () => Effect.fail(notAvailable),
  });
}
