import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeId, ID_PATTERN } from "../../service/ids.ts";

const bytes = fc.uint8Array({ minLength: 10, maxLength: 10 });
const millis = fc.integer({ min: 0, max: 2 ** 48 - 1 });

describe("ids", () => {
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
