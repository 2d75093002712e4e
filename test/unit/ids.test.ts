import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeId, freshId, ID_PATTERN } from "../../service/ids.ts";

const bytes = fc.uint8Array({ minLength: 10, maxLength: 10 });
const millis = fc.integer({ min: 0, max: 2 ** 48 - 1 });

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/** The format's definition, with BigInt: 10 base-32 digits of the time, then 16 of the 80 random bits. */
const reference = (prefix: string, t: number, random: Uint8Array) => {
  let time = BigInt(t);
  let bits = 0n;
  for (const byte of random.subarray(0, 10)) bits = (bits << 8n) | BigInt(byte);
  let digits = "";
  for (let i = 0; i < 16; i++, bits >>= 5n) digits = ALPHABET[Number(bits & 31n)] + digits;
  for (let i = 0; i < 10; i++, time >>= 5n) digits = ALPHABET[Number(time & 31n)] + digits;
  return `${prefix}_${digits}`;
};

describe("ids", () => {
  it("are the time's and the random bytes' base-32 digits, most significant first", () => {
    expect(encodeId("mdt", 1732579200000, Uint8Array.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]))).toBe(
      "mdt_01JDJW9300000G40R40M30E209",
    );
    expect(
      encodeId("whd", 2 ** 48 - 1, Uint8Array.from([255, 254, 253, 252, 251, 250, 249, 248, 247, 246])),
    ).toBe("whd_7ZZZZZZZZZZZZFVZ7VZBWZHXZP");
    fc.assert(
      fc.property(millis, bytes, (t, r) => {
        expect(encodeId("pay", t, r)).toBe(reference("pay", t, r));
      }),
    );
    fc.assert(
      fc.property(millis, fc.uint8Array({ minLength: 10, maxLength: 40 }), fc.nat(), (t, r, n) => {
        const offset = n % (r.length - 9);
        expect(encodeId("ch", t, r, offset)).toBe(reference("ch", t, r.subarray(offset)));
      }),
    );
  });

  it("are fresh across refills of the random pool", () => {
    const ids = Array.from({ length: 2000 }, () => freshId("whd", 1732579200000));
    for (const id of ids) expect(id).toMatch(ID_PATTERN);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("are prefixed, fixed-length Crockford base32", () => {
    fc.assert(
      fc.property(millis, bytes, (t, r) => {
        expect(encodeId("mdt", t, r)).toMatch(ID_PATTERN);
      }),
    );
  });

  it("sort by creation time", () => {
    fc.assert(
      fc.property(millis, millis, bytes, bytes, (a, b, ra, rb) => {
        fc.pre(a !== b);
        const [x, y] = [encodeId("ch", a, ra), encodeId("ch", b, rb)];
        expect(x < y).toBe(a < b);
      }),
    );
  });

  it("differ when the random part differs", () => {
    fc.assert(
      fc.property(millis, bytes, bytes, (t, ra, rb) => {
        fc.pre(Buffer.compare(Buffer.from(ra), Buffer.from(rb)) !== 0);
        expect(encodeId("evt", t, ra)).not.toBe(encodeId("evt", t, rb));
      }),
    );
  });
});
