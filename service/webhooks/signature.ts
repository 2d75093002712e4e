/**
 * The `X-Service-Signature` header: `t=<unix seconds>,v1=<hex HMAC-SHA256>` over the timestamp text, ".",
 * and the raw body bytes, keyed with the UTF-8 bytes of the endpoint's whole signing secret (`whsec_…`),
 * lowercase hex. During a secret rotation overlap the header carries one `v1` per secret, new first:
 * `t=…,v1=<new>,v1=<old>`.
 *
 * Signing (the dispatcher) and verifying (receivers: this module is the package's `./webhooks` export)
 * share this file so they cannot drift. Plain functions, no dependency beyond node:crypto, no clock (the
 * caller passes `now`), and `verifySignature` never throws: every input, however wrong, is a result.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const SIGNATURE_HEADER = "X-Service-Signature";
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** `t` is decimal digits only; at most 15 of them, so that it is an exact integer in a JS number. */
const TIMESTAMP = /^\d{1,15}$/;

const hmacHex = (secret: string, timestampText: string, body: Uint8Array): string =>
  createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(`${timestampText}.`, "utf8")
    .update(body)
    .digest("hex");

const rawBytes = (body: unknown): Uint8Array | undefined =>
  typeof body === "string" ? Buffer.from(body, "utf8") : body instanceof Uint8Array ? body : undefined;

/**
 * The lowercase hex HMAC-SHA256 of `${timestamp}.` followed by the body's bytes (a string body is taken as
 * UTF-8), keyed with the secret's UTF-8 bytes. `timestamp` is whole Unix seconds.
 */
export const computeSignature = (secret: string, timestamp: number, body: Uint8Array | string): string =>
  hmacHex(secret, String(timestamp), rawBytes(body) ?? new Uint8Array());

/** `t=<t>,v1=<sig for secrets[0]>[,v1=<sig for secrets[1]>…]`: one v1 per secret, no spaces. */
export const signatureHeader = (
  timestamp: number,
  body: Uint8Array | string,
  secrets: readonly string[],
): string => {
  const bytes = rawBytes(body) ?? new Uint8Array();
  return [
    `t=${timestamp}`,
    ...secrets.map((secret) => `v1=${hmacHex(secret, String(timestamp), bytes)}`),
  ].join(",");
};

export type VerifyResult =
  | { readonly ok: true; readonly timestamp: number }
  | { readonly ok: false; readonly reason: "malformed" | "expired" | "mismatch"; readonly message: string };

const fail = (reason: "malformed" | "expired" | "mismatch", message: string): VerifyResult => ({
  ok: false,
  reason,
  message,
});

/**
 * Verifies a delivery, in the specification's order; the first failing step decides the result:
 *
 * 1. **malformed**: split the header on ",", trim each part, split each on its first "=". Parts without
 *    "=" and unknown schemes (`v0=`…) are ignored; names are case-sensitive. Malformed when there is no
 *    `t`, more than one `t`, a `t` that is not 1-15 decimal digits, or no `v1`. A missing header is
 *    malformed.
 * 2. **expired**: |now − t| above the tolerance (300 s; exactly 300 s is accepted), in either direction
 *    (a timestamp from the future is as suspect as an old one). Checked *before* the HMAC, as the
 *    specification orders it: "expired" therefore says nothing about whether the signature was right,
 *    and a receiver must reject all three reasons alike. A `now` that is not a finite number fails
 *    closed as expired.
 * 3. **mismatch**: the HMAC is recomputed over the raw body exactly as given (verify before parsing;
 *    re-serialised JSON does not match) and over the `t` text exactly as received, for each secret, and
 *    compared with every `v1` in constant time (`timingSafeEqual` on equal lengths; a value of another
 *    length, non-hex, or uppercase hex is simply unequal). Every pair is compared, without stopping at
 *    the first match. Any `v1` matching any secret is valid (rotation overlap). Empty secrets are
 *    ignored (an empty key would let anyone sign), and a body that is neither a string nor bytes (e.g.
 *    already-parsed JSON) is a mismatch with a message saying so.
 */
export const verifySignature = (input: {
  readonly header: string | null | undefined;
  readonly body: Uint8Array | string;
  readonly secrets: string | readonly string[];
  /** Unix seconds. */
  readonly now: number;
  readonly toleranceSeconds?: number;
}): VerifyResult => {
  const header: unknown = input.header;
  if (typeof header !== "string" || header.trim() === "")
    return fail("malformed", `The ${SIGNATURE_HEADER} header is missing or empty.`);

  const timestamps: string[] = [];
  const candidates: string[] = [];
  for (const rawPart of header.split(",")) {
    const part = rawPart.trim();
    const at = part.indexOf("=");
    if (at < 0) continue;
    const name = part.slice(0, at);
    const value = part.slice(at + 1);
    if (name === "t") timestamps.push(value);
    else if (name === "v1") candidates.push(value);
  }
  const [t] = timestamps;
  if (t === undefined) return fail("malformed", `The ${SIGNATURE_HEADER} header has no \`t=\` timestamp.`);
  if (timestamps.length > 1)
    return fail("malformed", `The ${SIGNATURE_HEADER} header has more than one \`t=\` timestamp.`);
  if (!TIMESTAMP.test(t))
    return fail("malformed", "The `t=` timestamp is not whole Unix seconds in decimal digits.");
  if (candidates.length === 0)
    return fail("malformed", `The ${SIGNATURE_HEADER} header has no \`v1=\` signature.`);

  const timestamp = Number(t);
  const now: unknown = input.now;
  const tolerance: unknown = input.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS;
  if (typeof now !== "number" || !Number.isFinite(now))
    return fail("expired", "The current time given to verifySignature is not a number of Unix seconds.");
  const skew = Math.abs(now - timestamp);
  // Written so that a NaN tolerance fails closed.
  if (typeof tolerance !== "number" || !(skew <= tolerance))
    return fail(
      "expired",
      `The signature's timestamp is ${skew} s from now, above the tolerance of ${String(tolerance)} s.`,
    );

  const body = rawBytes(input.body);
  if (body === undefined)
    return fail(
      "mismatch",
      "The body must be the raw request bytes as received (a string, or a Uint8Array such as a Buffer), not parsed JSON.",
    );
  const secretsInput: unknown = input.secrets;
  const secrets = (Array.isArray(secretsInput) ? secretsInput : [secretsInput]).filter(
    (secret): secret is string => typeof secret === "string" && secret !== "",
  );
  if (secrets.length === 0) return fail("mismatch", "No signing secret to verify with (empty secrets).");

  const given = candidates.map((candidate) => Buffer.from(candidate, "utf8"));
  let matched = false;
  for (const secret of secrets) {
    const expected = Buffer.from(hmacHex(secret, t, body), "utf8");
    for (const candidate of given) {
      // timingSafeEqual requires equal lengths; another length is simply not a match.
      const equal = candidate.length === expected.length && timingSafeEqual(candidate, expected);
      if (equal) matched = true;
    }
  }
  return matched
    ? { ok: true, timestamp }
    : fail(
        "mismatch",
        "No v1 signature matches the body and secret (verify over the raw bytes as received, before parsing).",
      );
};
