import { describe, expect, it } from "vitest";
import { API_KEY_PATTERN, generateApiKey, hashApiKey, redactApiKey } from "../../service/auth/api-keys.ts";

describe("API keys", () => {
  it("carry their mode in the prefix and 256 random bits", () => {
    const test = generateApiKey(false);
    const live = generateApiKey(true);
    expect(test).toMatch(/^sk_test_[0-9A-Za-z]{43}$/);
    expect(live).toMatch(/^sk_live_[0-9A-Za-z]{43}$/);
    expect(API_KEY_PATTERN.test(test)).toBe(true);
    expect(new Set(Array.from({ length: 200 }, () => generateApiKey(false))).size).toBe(200);
  });

  it("are stored as a SHA-256 and shown redacted", () => {
    const key = generateApiKey(false);
    expect(hashApiKey(key)).toHaveLength(32);
    expect(hashApiKey(key).equals(hashApiKey(key))).toBe(true);
    expect(redactApiKey(key)).toBe(`sk_test_…${key.slice(-4)}`);
  });
});
