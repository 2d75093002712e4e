/**
 * A customer revokes a mandate without gas: it signs the escrow's EIP-712 `Revoke(mandateId, deadline)`
 * (an EOA, or an ERC-1271 wallet) and the relayer submits `revokeWithSignature`; the escrow emits
 * `MandateRevoked`, so `mandate.revoked` follows from the confirmed fact as for a revocation the customer
 * sent itself. Two functions on a mandate record, so any hosted page (the authorization page today, a
 * customer portal) can offer it: the typed data to sign, and the submission of the signature.
 *
 * A signature that would not revoke (another signer, another mandate, chain or contract, past its
 * deadline, a mandate revoked already) is refused with a 4xx before anything is sent: one run of the
 * call checks it as the escrow will. The relayed transaction counts against the mandate's daily limit of
 * relayed transactions (`AuthorizationLimits`), beside its authorisations.
 */
import { Context, Effect, Layer, Option, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Hex } from "viem";
import { authorizationPrefix } from "../chains/authorization-groups.ts";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { relayerUnavailable, unavailable } from "../chains/unavailable.ts";
import { SignatureHex } from "../chains/wallet-signatures.ts";
import type { ErrorCode } from "../error-codes.ts";
import { InvalidRequest, type NotFound, type RateLimited, type Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { TypedDataJson } from "./authorization-requests.ts";
import { chainOfMandate } from "./authorization-session.ts";
import { AuthorizationLimits, checkRelayedLimit } from "./authorization-signing.ts";
import type { MandateRow } from "./mandate-object.ts";
import { MandateStore } from "./mandate-store.ts";
import { revokeTypedDataJson, SIGNATURE_WINDOW_SECONDS } from "./terms.ts";

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

/** The relayer action of a mandate's signed revocation (under the mandate's prefix: one daily limit). */
export const revocationAction = (chainId: number, onchainId: string) =>
  `${authorizationPrefix(chainId, onchainId)}revoke`;

const refuse = (code: ErrorCode, message: string, param: string | null = null) =>
  new InvalidRequest({ code, message, param });

/** What the escrow's refusal of a signed revocation means to the customer. */
const refusalOf = (errorName: string) => {
  switch (errorName) {
    case "InvalidSignature":
      return refuse(
        "signature_invalid",
        "The signature is not the mandate's wallet's signature of this revocation.",
        "signature",
      );
    case "Revoked":
      return refuse("mandate_revoked", "This mandate is revoked already.");
    case "SignatureExpired":
      return refuse("terms_expired", "The revocation's deadline has passed. Sign it again.", "deadline");
    default:
      return refuse("authorization_failed", `The chain refused the revocation (${errorName}).`);
  }
};

export type RevocationFailure = InvalidRequest | Unavailable | RateLimited | NotFound | SqlError.SqlError;

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const heads = yield* ChainHeads;
  const relayer = yield* Relayer;
  const store = yield* MandateStore;
  const gasCosts = yield* GasCosts;
  const limits = yield* AuthorizationLimits;
  const sql = yield* SqlClient.SqlClient;

  /** A mandate the customer can revoke: signed on chain, not revoked. */
  const revocable = (mandate: MandateRow) =>
    Effect.gen(function* () {
      if (mandate.status === "revoked")
        return yield* refuse("mandate_revoked", "This mandate is revoked already.");
      if (mandate.onchain_id === null || mandate.customer_address === null)
        return yield* refuse(
          "mandate_not_authorized",
          "This mandate was never signed, so there is nothing to revoke on chain.",
        );
      return { onchainId: mandate.onchain_id as Hex, customer: mandate.customer_address };
    });

  /** The revocation the customer's wallet signs, valid for `SIGNATURE_WINDOW_SECONDS` of chain time. */
  const request = (mandate: MandateRow) =>
    Effect.gen(function* () {
      const chain = yield* chainOfMandate(registry, mandate);
      const { onchainId, customer } = yield* revocable(mandate);
      const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
      return {
        object: "revocation_request" as const,
        mandate: mandate.id,
        customer_address: customer,
        typed_data: revokeTypedDataJson(
          chain.id,
          chain.escrow.address,
          onchainId,
          now + SIGNATURE_WINDOW_SECONDS,
        ),
      } satisfies RevocationRequestObject;
    });

  /** Checks the signed revocation as the escrow will, then has the relayer send it. */
  const submit = (mandate: MandateRow, input: RevocationSubmission) =>
    Effect.gen(function* () {
      const chain = yield* chainOfMandate(registry, mandate);
      const { onchainId } = yield* revocable(mandate);
      const deadline = BigInt(input.deadline);
      const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
      if (deadline < BigInt(now)) return yield* refusalOf("SignatureExpired");
      const sender = relayer.address(chain.id);
      if (sender === undefined) return yield* relayerUnavailable("send a revocation");
      const args = [onchainId, deadline, input.signature];
      const measured = yield* clients
        .measureEscrow(chain, sender, "revokeWithSignature", args, "latest")
        .pipe(Effect.option);
      if (Option.isNone(measured)) {
        const refused = yield* clients
          .simulateOutcome(chain, sender, "revokeWithSignature", args)
          .pipe(Effect.mapError(unavailable));
        if (refused !== undefined) return yield* refusalOf(refused.errorName);
      }
      const action = revocationAction(chain.id, onchainId);
      const sent = yield* sql.withTransaction(
        Effect.gen(function* () {
          // Under the mandate's row lock: one decision per mandate at a time.
          yield* store.load({ merchantId: mandate.merchant_id, livemode: mandate.livemode }, mandate.id, {
            lock: true,
          });
          yield* checkRelayedLimit(relayer, limits, chain, onchainId);
          const submitted = yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data: escrowCallData("revokeWithSignature", args),
              purpose: `${action}:${yield* newId("request")}`,
              action,
              gasUsed: Option.getOrUndefined(measured),
              merchants: [mandate.merchant_id],
            })
            .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
          yield* gasCosts.carries(chain.id, submitted.purpose, "revocation", "mandate", [mandate.id]);
          return submitted;
        }),
      );
      return {
        object: "revocation" as const,
        mandate: mandate.id,
        status: "pending" as const,
        transaction: sent.hash,
      } satisfies RevocationObject;
    });

  return { request, submit };
});

export class Revocations extends Context.Service<Revocations>()("Revocations", { make }) {
  static readonly layer = Layer.effect(Revocations, make);
}
