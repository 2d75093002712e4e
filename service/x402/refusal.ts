import { Data, Effect } from "effect";
import type { InvalidRequest } from "../errors.ts";
import { reasonOf, type X402Reason } from "./reasons.ts";

/** A request x402 refuses: an answer (`isValid: false`, `success: false`), not an HTTP error. */
export class X402Refusal extends Data.TaggedError("X402Refusal")<{
  readonly reason: X402Reason;
  readonly message: string;
  readonly payer?: string;
}> {}

export const refusal = (reason: X402Reason, message: string, payer?: string) =>
  new X402Refusal({ reason, message, ...(payer === undefined ? {} : { payer }) });

/** One of this API's refusals, as x402's (other failures, a 503 or a 429, stay HTTP errors). */
export const refusedAs =
  (phase: "verify" | "settle", scheme: "exact" | "mandate", payer: string | undefined) =>
  (error: InvalidRequest) =>
    Effect.fail(refusal(reasonOf(error.code, phase, scheme), `${error.code}: ${error.message}`, payer));

/** One of this API's refusals of what the requirements ask (the payment they name), as x402's. */
export const refusedRequirements = (payer: string) => (error: InvalidRequest) =>
  Effect.fail(refusal("invalid_payment_requirements", `${error.code}: ${error.message}`, payer));

export const sameAddress = (a: string, b: string) =>
  /^0x[0-9a-fA-F]{40}$/.test(a) && /^0x[0-9a-fA-F]{40}$/.test(b) && a.toLowerCase() === b.toLowerCase();
