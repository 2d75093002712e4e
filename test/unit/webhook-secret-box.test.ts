import { Effect, Result } from "effect";
import { describe, expect, it } from "vitest";
import {
  generateSecretsKey,
  generateSigningSecret,
  open,
  parseSecretsKey,
  seal,
} from "../../service/webhooks/secret-box.ts";

const key = Effect.runSync(parseSecretsKey(generateSecretsKey()));

describe("webhook signing secrets at rest", () => {
  it("round-trips, never stores the clear text, and differs on every seal", () => {
    const secret = generateSigningSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const a = seal(key, secret, "we_1");
    const b = seal(key, secret, "we_1");
    expect(a.equals(b)).toBe(false);
    expect(a.toString("latin1")).not.toContain(secret.slice(6));
    expect(Effect.runSync(open(key, a, "we_1"))).toBe(secret);
  });

  it("refuses another endpoint's ciphertext, a tampered one and another key", () => {
    const sealed = seal(key, generateSigningSecret(), "we_1");
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1] = (tampered[tampered.length - 1] ?? 0) ^ 1;
    const otherKey = Effect.runSync(parseSecretsKey(generateSecretsKey()));
    for (const attempt of [
      open(key, sealed, "we_2"),
      open(key, tampered, "we_1"),
      open(otherKey, sealed, "we_1"),
    ]) {
      const result = Effect.runSync(Effect.result(attempt));
      expect(Result.isFailure(result)).toBe(true);
    }
  });

  it("rejects a deployment key that is not 32 bytes of base64", () => {
    for (const bad of [
      "",
      "short",
      Buffer.alloc(31).toString("base64"),
      Buffer.alloc(33).toString("base64"),
    ]) {
      const result = Effect.runSync(Effect.result(parseSecretsKey(bad)));
      expect(Result.isFailure(result)).toBe(true);
    }
  });
});
