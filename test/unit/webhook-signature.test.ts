/** The webhook signature, rule by rule, with a fixed clock (`now` is always passed explicitly). */
import { createHmac } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  computeSignature,
  SIGNATURE_HEADER,
  SIGNATURE_TOLERANCE_SECONDS,
  signatureHeader,
  verifySignature,
} from "../../service/webhooks/signature.ts";

const SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuvwxyzABCDEF";
const OLD_SECRET = "whsec_previous_secret";
const NOW = 1_767_225_600;
const BODY =
  '{"id":"evt_1","object":"event","type":"charge.released","created":1767225600,"livemode":false,"data":{"object":{"id":"ch_1","amount":"10.00"}}}';

/** Computed independently of the module: the key is the secret string's UTF-8 bytes. */
const sig = (secret = SECRET, t: number | string = NOW, body: string | Uint8Array = BODY) =>
  createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(`${t}.`)
    .update(typeof body === "string" ? Buffer.from(body, "utf8") : body)
    .digest("hex");

const verify = (
  header: string | null | undefined,
  body: string | Uint8Array = BODY,
  secrets: string | readonly string[] = SECRET,
  now = NOW,
) => verifySignature({ header, body, secrets, now });

const valid = `t=${NOW},v1=${sig()}`;

describe("signing", () => {
  it("exports the header name and the 300 s tolerance", () => {
    expect(SIGNATURE_HEADER).toBe("X-Service-Signature");
    expect(SIGNATURE_TOLERANCE_SECONDS).toBe(300);
  });

  it("matches known-answer vectors computed outside Node (openssl dgst -sha256 -hmac)", () => {
    const body =
      '{"id":"evt_1","object":"event","type":"webhook.test","created":1767225600,"livemode":false,"data":{"object":{}}}';
    const expected = "8986ee4a461e7d4e2893d9f8211abd1696ddf4f5afa7d9a0a4562c2dec3cc59f";
    expect(computeSignature("whsec_known_answer", 1_767_225_600, body)).toBe(expected);
    expect(computeSignature("whsec_known_answer", 1_767_225_600, Buffer.from(body))).toBe(expected);
    expect(sig("whsec_known_answer", 1_767_225_600, body)).toBe(expected);
    // Non-ASCII secret and body: both are taken as UTF-8 bytes.
    expect(computeSignature("whsec_ünïcode", 1_767_225_600, '{"a":"é"}')).toBe(
      "dcd00ac8b905cb8f804b506b1ce4a0589708e1c0a1131a52607cc2cef7de62ae",
    );
  });

  it("signs HMAC-SHA256(secret, t + '.' + raw body) in lowercase hex; header without spaces", () => {
    expect(computeSignature(SECRET, NOW, BODY)).toBe(sig());
    expect(computeSignature(SECRET, NOW, BODY)).toMatch(/^[0-9a-f]{64}$/);
    expect(signatureHeader(NOW, BODY, [SECRET])).toBe(valid);
    expect(signatureHeader(NOW, new TextEncoder().encode(BODY), [SECRET])).toBe(valid);
  });

  it("puts one v1 per secret, in order, during a rotation overlap", () => {
    expect(signatureHeader(NOW, BODY, [SECRET, OLD_SECRET])).toBe(
      `t=${NOW},v1=${sig()},v1=${sig(OLD_SECRET)}`,
    );
  });
});

describe("verification: malformed", () => {
  it.each([
    ["missing header", undefined],
    ["null header", null],
    ["empty header", ""],
    ["blank header", "   "],
    ["no t", `v1=${sig()}`],
    ["no v1", `t=${NOW}`],
    ["only an unknown scheme", `t=${NOW},v0=${sig()}`],
    ["t without value", `t=,v1=${sig()}`],
    ["t non-numeric", `t=abc,v1=${sig()}`],
    ["t negative", `t=-${NOW},v1=${sig()}`],
    ["t with a fraction", `t=${NOW}.5,v1=${sig()}`],
    ["t in exponent form", `t=1.7672256e9,v1=${sig()}`],
    ["t in hex", `t=0x${NOW.toString(16)},v1=${sig()}`],
    ["t with an inner space", `t= ${NOW},v1=${sig()}`],
    ["t too long for an exact number", `t=1${"0".repeat(15)},v1=${sig()}`],
    ["two t", `t=${NOW},t=${NOW},v1=${sig()}`],
    ["uppercase names", `T=${NOW},V1=${sig()}`],
    ["spaces around '='", `t = ${NOW},v1 = ${sig()}`],
    ["no '=' at all", "garbage"],
    ["another separator", `t=${NOW};v1=${sig()}`],
  ])("%s", (_, header) => {
    const result = verify(header);
    expect(result).toMatchObject({ ok: false, reason: "malformed" });
    expect(result.ok ? "" : result.message).not.toBe("");
  });

  it("is malformed before anything else, even for an expired timestamp and a wrong body", () => {
    expect(verify(`t=${NOW - 10_000}`, "tampered")).toMatchObject({ reason: "malformed" });
  });
});

describe("verification: expired", () => {
  it("accepts exactly 300 s in either direction and expires at 301 s", () => {
    for (const t of [NOW - 300, NOW + 300, NOW - 1, NOW + 1])
      expect(verify(`t=${t},v1=${sig(SECRET, t)}`), String(t - NOW)).toEqual({ ok: true, timestamp: t });
    for (const t of [NOW - 301, NOW + 301, 0])
      expect(verify(`t=${t},v1=${sig(SECRET, t)}`), String(t - NOW)).toMatchObject({
        ok: false,
        reason: "expired",
      });
  });

  it("treats a timestamp from the future (clock skew) like an old one", () => {
    const t = NOW + 3600;
    expect(verify(`t=${t},v1=${sig(SECRET, t)}`)).toMatchObject({ reason: "expired" });
  });

  it("is checked before the HMAC: an old header with a wrong signature is expired, not a mismatch", () => {
    expect(verify(`t=${NOW - 301},v1=${"0".repeat(64)}`)).toMatchObject({ reason: "expired" });
  });

  it("honours a custom tolerance, and fails closed on a clock or tolerance that is not a number", () => {
    const t = NOW - 30;
    const header = `t=${t},v1=${sig(SECRET, t)}`;
    expect(verifySignature({ header, body: BODY, secrets: SECRET, now: NOW, toleranceSeconds: 30 })).toEqual({
      ok: true,
      timestamp: t,
    });
    expect(
      verifySignature({ header, body: BODY, secrets: SECRET, now: NOW, toleranceSeconds: 29 }),
    ).toMatchObject({ reason: "expired" });
    for (const now of [Number.NaN, Number.POSITIVE_INFINITY])
      expect(verifySignature({ header, body: BODY, secrets: SECRET, now })).toMatchObject({
        reason: "expired",
      });
    expect(
      verifySignature({ header, body: BODY, secrets: SECRET, now: NOW, toleranceSeconds: Number.NaN }),
    ).toMatchObject({ reason: "expired" });
  });
});

describe("verification: ok and mismatch", () => {
  it("accepts a valid header, also with spaces around parts and unknown schemes or bare words ignored", () => {
    expect(verify(valid)).toEqual({ ok: true, timestamp: NOW });
    expect(verify(valid, Buffer.from(BODY, "utf8"))).toEqual({ ok: true, timestamp: NOW });
    expect(verify(` t=${NOW} , v0=abc ,  v1=${sig()} ,extra, x=y `)).toEqual({ ok: true, timestamp: NOW });
    expect(verify(`v1=${sig()},t=${NOW}`)).toEqual({ ok: true, timestamp: NOW });
  });

  it("recomputes over the t text as received (leading zeros are signed text)", () => {
    expect(verify(`t=0${NOW},v1=${sig(SECRET, `0${NOW}`)}`)).toEqual({ ok: true, timestamp: NOW });
    expect(verify(`t=0${NOW},v1=${sig()}`)).toMatchObject({ reason: "mismatch" });
  });

  it("is a mismatch for a tampered body byte", () => {
    const bytes = Buffer.from(BODY, "utf8");
    bytes[10] = (bytes[10] ?? 0) ^ 1;
    expect(verify(valid, bytes)).toMatchObject({ ok: false, reason: "mismatch" });
    expect(verify(valid, BODY.replace('"10.00"', '"99.00"'))).toMatchObject({ reason: "mismatch" });
    expect(verify(valid, `${BODY}\n`)).toMatchObject({ reason: "mismatch" });
    expect(verify(valid, "")).toMatchObject({ reason: "mismatch" });
  });

  it("is a mismatch for re-serialised JSON: same value, other key order or whitespace", () => {
    const parsed = JSON.parse(BODY) as Record<string, unknown>;
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(parsed).reverse()));
    expect(JSON.parse(reordered)).toEqual(parsed);
    expect(verify(valid, reordered)).toMatchObject({ reason: "mismatch" });
    expect(verify(valid, JSON.stringify(parsed, null, 2))).toMatchObject({ reason: "mismatch" });
    // Round-tripping happens to preserve this body; that is luck, not a guarantee, but it does verify.
    expect(verify(valid, JSON.stringify(parsed))).toMatchObject({ ok: true });
  });

  it("is a mismatch for a signature that is short, long, uppercase, non-hex or of another t", () => {
    const good = sig();
    for (const v1 of [
      good.slice(0, 63),
      good.slice(0, 32),
      `${good}0`,
      good.toUpperCase(),
      `${good.slice(0, 63)}g`,
      "",
      Buffer.from(good, "hex").toString("base64"),
      sig(SECRET, NOW + 1),
    ])
      expect(verify(`t=${NOW},v1=${v1}`), v1).toMatchObject({ ok: false, reason: "mismatch" });
    // The signature is bound to t: moving t within the tolerance breaks it.
    expect(verify(`t=${NOW + 1},v1=${good}`)).toMatchObject({ reason: "mismatch" });
  });

  it("is a mismatch for the wrong secret, no usable secret, or a body that is not raw bytes", () => {
    expect(verify(valid, BODY, "whsec_other")).toMatchObject({ reason: "mismatch" });
    expect(verify(valid, BODY, [])).toMatchObject({ reason: "mismatch" });
    expect(verify(valid, BODY, "")).toMatchObject({ reason: "mismatch" });
    // An empty secret is ignored even when the header was signed with one.
    expect(verify(`t=${NOW},v1=${sig("")}`, BODY, ["", "whsec_other"])).toMatchObject({
      reason: "mismatch",
    });
    const parsed = JSON.parse(BODY) as unknown as string;
    const result = verify(valid, parsed);
    expect(result).toMatchObject({ ok: false, reason: "mismatch" });
    expect(result.ok ? "" : result.message).toMatch(/raw request bytes/);
  });

  it("rotation: accepts when only the second v1 matches, and with either secret held", () => {
    const header = signatureHeader(NOW, BODY, ["whsec_new", OLD_SECRET]);
    expect(header.split(",")).toHaveLength(3);
    // The receiver still holds only the old secret: the second entry matches.
    expect(verify(header, BODY, OLD_SECRET)).toEqual({ ok: true, timestamp: NOW });
    expect(verify(`t=${NOW},v1=${"f".repeat(64)},v1=${sig(OLD_SECRET)}`, BODY, OLD_SECRET)).toMatchObject({
      ok: true,
    });
    expect(verify(header, BODY, "whsec_new")).toMatchObject({ ok: true });
    expect(verify(header, BODY, ["whsec_unrelated", "whsec_new"])).toMatchObject({ ok: true });
    expect(verify(header, BODY, "whsec_unrelated")).toMatchObject({ ok: false, reason: "mismatch" });
  });

  it("gives each outcome its own reason and message", () => {
    const results = [
      verify(`t=${NOW}`),
      verify(`t=${NOW - 301},v1=${sig(SECRET, NOW - 301)}`),
      verify(valid, "x"),
      verify(valid),
    ];
    expect(results.map((r) => (r.ok ? "ok" : r.reason))).toEqual(["malformed", "expired", "mismatch", "ok"]);
    expect(new Set(results.map((r) => (r.ok ? "" : r.message))).size).toBe(4);
  });
});

describe("properties", () => {
  const secret = fc.string({ unit: "grapheme", minLength: 1, maxLength: 64 });
  const body = fc.uint8Array({ maxLength: 512 });
  const timestamp = fc.integer({ min: 0, max: 2 ** 40 });

  it("sign → verify is ok for any secret, body and timestamp within the tolerance", () => {
    fc.assert(
      fc.property(secret, body, timestamp, fc.integer({ min: -300, max: 300 }), (s, b, t, skew) => {
        const header = signatureHeader(t, b, [s]);
        expect(verifySignature({ header, body: b, secrets: s, now: t + skew })).toEqual({
          ok: true,
          timestamp: t,
        });
        // The same with the secret among others, and with the header carrying a second, unrelated v1.
        expect(
          verifySignature({ header: signatureHeader(t, b, ["whsec_x", s]), body: b, secrets: [s], now: t }),
        ).toMatchObject({ ok: true });
      }),
    );
  });

  it("any single-byte change of the body (or one byte more or less) is a mismatch", () => {
    fc.assert(
      fc.property(
        secret,
        fc.uint8Array({ minLength: 1, maxLength: 512 }),
        timestamp,
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        fc.integer({ min: 0, max: 255 }),
        (s, b, t, at, flip, extra) => {
          const header = signatureHeader(t, b, [s]);
          const index = at % b.length;
          const changed = Uint8Array.from(b);
          changed[index] = (changed[index] ?? 0) ^ flip;
          for (const other of [changed, b.subarray(0, b.length - 1), Uint8Array.from([...b, extra])])
            expect(verifySignature({ header, body: other, secrets: s, now: t })).toMatchObject({
              ok: false,
              reason: "mismatch",
            });
        },
      ),
    );
  });

  it("any |skew| above 300 s is expired, whatever the signature", () => {
    fc.assert(
      fc.property(
        secret,
        body,
        timestamp,
        fc.integer({ min: 301, max: 2 ** 40 }),
        fc.boolean(),
        (s, b, t, skew, ahead) => {
          const header = signatureHeader(t, b, [s]);
          expect(
            verifySignature({ header, body: b, secrets: s, now: ahead ? t + skew : t - skew }),
          ).toMatchObject({ ok: false, reason: "expired" });
        },
      ),
    );
  });

  it("never throws, whatever it is given", () => {
    fc.assert(
      fc.property(
        fc.anything(),
        fc.anything(),
        fc.anything(),
        fc.anything(),
        fc.anything(),
        (h, b, s, n, tol) => {
          const input = {
            header: h,
            body: b,
            secrets: s,
            now: n,
            toleranceSeconds: tol,
          } as unknown as Parameters<typeof verifySignature>[0];
          const result = verifySignature(input);
          expect(typeof result.ok).toBe("boolean");
        },
      ),
    );
    fc.assert(
      fc.property(fc.string(), (h) => {
        expect(typeof verify(h).ok).toBe("boolean");
        expect(typeof verify(`t=${NOW},${h}`).ok).toBe("boolean");
      }),
    );
  });
});
