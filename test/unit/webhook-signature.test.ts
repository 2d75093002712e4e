/** The receiver's verification, rule by rule, with a fixed clock. */
import { createHmac } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeSignature, signatureHeader, verifySignature } from "../../service/webhooks/signature.ts";

const SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuvwxyzABCDEF";
const NOW = 1_767_225_600;
const BODY =
  '{"id":"evt_1","object":"event","type":"charge.released","created":1767225600,"livemode":false,"data":{"object":{"id":"ch_1"}}}';
const sig = (secret = SECRET, t = NOW, body = BODY) =>
  createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
const verify = (
  header: string | undefined,
  body: string | Uint8Array = BODY,
  secrets: string | string[] = SECRET,
  now = NOW,
) => verifySignature({ header, body, secrets, now });

describe("webhook signature", () => {
  it("signs exactly HMAC-SHA256(secret, t + '.' + raw body) in lowercase hex, header without spaces", () => {
    expect(computeSignature(SECRET, NOW, BODY)).toBe(sig());
    expect(signatureHeader(NOW, BODY, [SECRET])).toBe(`t=${NOW},v1=${sig()}`);
    expect(signatureHeader(NOW, Buffer.from(BODY), [SECRET, "whsec_old"])).toBe(
      `t=${NOW},v1=${sig()},v1=${sig("whsec_old")}`,
    );
  });

  it("accepts a valid header, with spaces around parts and unknown schemes ignored", () => {
    expect(verify(`t=${NOW},v1=${sig()}`)).toEqual({ ok: true, timestamp: NOW });
    expect(verify(` t=${NOW} , v0=abc ,  v1=${sig()} `)).toEqual({ ok: true, timestamp: NOW });
  });

  it("is malformed without t, without v1, with a non-numeric t, or empty", () => {
    for (const header of [
      `v1=${sig()}`,
      `t=${NOW}`,
      `t=${NOW},v0=${sig()}`,
      `t=abc,v1=${sig()}`,
      "",
      undefined,
      "garbage",
      `t=,v1=${sig()}`,
    ])
      expect(verify(header), String(header)).toMatchObject({ ok: false, reason: "malformed" });
  });

  it("is expired beyond 300 s either way, and valid at exactly 300 s", () => {
    expect(verify(`t=${NOW - 300},v1=${sig(SECRET, NOW - 300)}`)).toMatchObject({ ok: true });
    expect(verify(`t=${NOW + 300},v1=${sig(SECRET, NOW + 300)}`)).toMatchObject({ ok: true });
    expect(verify(`t=${NOW - 301},v1=${sig(SECRET, NOW - 301)}`)).toMatchObject({
      ok: false,
      reason: "expired",
    });
    expect(verify(`t=${NOW + 301},v1=${sig(SECRET, NOW + 301)}`)).toMatchObject({
      ok: false,
      reason: "expired",
    });
  });

  it("is a mismatch for a tampered or re-serialised body, another secret, a short or uppercase signature", () => {
    const header = `t=${NOW},v1=${sig()}`;
    expect(verify(header, BODY.replace("ch_1", "ch_2"))).toMatchObject({ ok: false, reason: "mismatch" });
    expect(verify(header, JSON.stringify(JSON.parse(BODY), null, 2))).toMatchObject({
      ok: false,
      reason: "mismatch",
    });
    expect(verify(header, BODY, "whsec_other")).toMatchObject({ ok: false, reason: "mismatch" });
    expect(verify(`t=${NOW},v1=${sig().slice(0, 63)}`)).toMatchObject({ ok: false, reason: "mismatch" });
    expect(verify(`t=${NOW},v1=${sig().toUpperCase()}`)).toMatchObject({ ok: false, reason: "mismatch" });
    expect(verify(`t=${NOW + 1},v1=${sig()}`)).toMatchObject({ ok: false, reason: "mismatch" });
  });

  it("accepts either signature during a rotation overlap, whichever secret the receiver holds", () => {
    const header = signatureHeader(NOW, BODY, ["whsec_new", SECRET]);
    expect(verify(header, BODY, SECRET)).toMatchObject({ ok: true });
    expect(verify(header, BODY, "whsec_new")).toMatchObject({ ok: true });
    expect(verify(header, BODY, ["whsec_unrelated", "whsec_new"])).toMatchObject({ ok: true });
    expect(verify(header, BODY, "whsec_unrelated")).toMatchObject({ ok: false, reason: "mismatch" });
  });

  it("properties: signed bodies verify, any changed byte mismatches, any skew above 300 s expires", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }),
        fc.uint8Array({ minLength: 1, maxLength: 512 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: -300, max: 300 }),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        (secret, body, t, skew, at, flip) => {
          const header = signatureHeader(t, body, [secret]);
          expect(verifySignature({ header, body, secrets: secret, now: t + skew })).toEqual({
            ok: true,
            timestamp: t,
          });
          const changed = Uint8Array.from(body);
          const index = at % changed.length;
          changed[index] = (changed[index] ?? 0) ^ flip;
          expect(verifySignature({ header, body: changed, secrets: secret, now: t })).toMatchObject({
            reason: "mismatch",
          });
        },
      ),
    );
    fc.assert(
      fc.property(fc.integer({ min: 301, max: 2 ** 30 }), fc.boolean(), (skew, ahead) => {
        const header = signatureHeader(NOW, BODY, [SECRET]);
        expect(verify(header, BODY, SECRET, ahead ? NOW + skew : NOW - skew)).toMatchObject({
          reason: "expired",
        });
      }),
    );
  });
});
