/**
 * The `X-Service-Signature` header: `t=<unix seconds>,v1=<hex HMAC-SHA256>` over `t`, ".", and the raw
 * body bytes, keyed with the UTF-8 bytes of the endpoint's whole signing secret. Signing (the
 * dispatcher) and verifying (receivers: this module is the package's `./webhooks` export) share this
 * file so they cannot drift. Plain functions, no dependencies beyond node:crypto, never throws.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const SIGNATURE_HEADER = "X-Service-Signature";
export const SIGNATURE_TOLERANCE_SECONDS = 300;

const bytes = (body: Uint8Array | string): Uint8Array =>
  typeof body === "string" ? Buffer.from(body, "utf8") : body;

export const computeSignature = (secret: string, timestamp: number, body: Uint8Array | string): string =>
  createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(`${timestamp}.`, "utf8")
    .update(bytes(body))
    .digest("hex");

/** `t=<t>,v1=<sig>[,v1=<sig>…]`: one v1 per secret (two during a rotation overlap), no spaces. */
export const signatureHeader = (
  timestamp: number,
  body: Uint8Array | string,
  secrets: readonly string[],
): string =>
  [`t=${timestamp}`, ...secrets.map((secret) => `v1=${computeSignature(secret, timestamp, body)}`)].join(",");

export type VerifyResult =
  | { readonly ok: true; readonly timestamp: number }
  | { readonly ok: false; readonly reason: "malformed" | "expired" | "mismatch"; readonly message: string };

/**
 * The receiver's steps, in the specification's order: split the header on commas, trim each part,
 * split each on the first "="; no `t` or no `v1` → malformed; |now − t| above the tolerance → expired;
 * then the HMAC over the raw bytes as received, compared in constant time with each `v1` (a length
 * mismatch is a mismatch). Any `v1` matching any of `secrets` is a valid signature.
 */
export const verifySignature = (input: {
  readonly header: string | null | undefined;
  readonly body: Uint8Array | string;
  readonly secrets: string | readonly string[];
  /** Unix seconds. */
  readonly now: number;
  readonly toleranceSeconds?: number;
}): VerifyResult => {
  const parts = (input.header ?? "").split(",").map((part) => part.trim());
  let t: string | undefined;
  const candidates: string[] = [];
  for (const part of parts) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    const name = part.slice(0, at);
    const value = part.slice(at + 1);
    if (name === "t" && t === undefined) t = value;
    else if (name === "v1") candidates.push(value);
  }
  if (t === undefined || !/^\d{1,15}$/.test(t))
    return { ok: false, reason: "malformed", message: "The signature header has no valid `t=` timestamp." };
  if (candidates.length === 0)
    return { ok: false, reason: "malformed", message: "The signature header has no `v1=` signature." };
  const timestamp = Number(t);
  const tolerance = input.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS;
  if (Math.abs(input.now - timestamp) > tolerance)
    return {
      ok: false,
      reason: "expired",
      message: `The signature's timestamp is ${Math.abs(input.now - timestamp)} s from now (tolerance ${tolerance} s).`,
    };
  const secrets = typeof input.secrets === "string" ? [input.secrets] : input.secrets;
  const body = bytes(input.body);
  let matched = false;
  for (const secret of secrets) {
    const expected = Buffer.from(computeSignature(secret, timestamp, body), "utf8");
    for (const candidate of candidates) {
      const given = Buffer.from(candidate, "utf8");
      // timingSafeEqual needs equal lengths; a different length is simply not a match.
      if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
    }
  }
  return matched
    ? { ok: true, timestamp }
    : {
        ok: false,
        reason: "mismatch",
        message: "No v1 signature matches the body and secret (verify over the raw bytes, before parsing).",
      };
};
