/**
 * Signing secrets at rest: AES-256-GCM under the deployment's WEBHOOK_SECRETS_KEY, with the endpoint id
 * as associated data (a ciphertext copied onto another endpoint's row does not decrypt). Layout:
 * version byte (1) | 12-byte nonce | 16-byte tag | ciphertext. The clear secret leaves the service once,
 * in the response that creates (or rotates) it, and otherwise only as HMACs.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { Context, Effect, Layer, Redacted, Schema } from "effect";

const VERSION = 1;

export class SecretsKeyInvalid extends Schema.TaggedError<SecretsKeyInvalid>()("SecretsKeyInvalid", {
  message: Schema.String,
}) {}

/** A stored secret that does not decrypt: the deployment's key changed, or the row was tampered with. */
export class SecretUnreadable extends Schema.TaggedError<SecretUnreadable>()("SecretUnreadable", {
  message: Schema.String,
}) {}

/** `whsec_` and 32 random bytes in base64url: the HMAC key is this whole string's UTF-8 bytes. */
export const generateSigningSecret = (): string => `whsec_${randomBytes(32).toString("base64url")}`;

/** A fresh key for WEBHOOK_SECRETS_KEY. */
export const generateSecretsKey = (): string => randomBytes(32).toString("base64");

export const parseSecretsKey = (encoded: string): Effect.Effect<Buffer, SecretsKeyInvalid> => {
  const key = Buffer.from(encoded.trim(), "base64");
  return key.length === 32
    ? Effect.succeed(key)
    : Effect.fail(
        new SecretsKeyInvalid({
          message: `WEBHOOK_SECRETS_KEY must be 32 bytes in base64 (got ${key.length} bytes). Generate one with: node -e "console.log(crypto.randomBytes(32).toString('base64'))"`,
        }),
      );
};

export const seal = (key: Buffer, plaintext: string, context: string): Buffer => {
  const nonce = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(context, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), nonce, cipher.getAuthTag(), body]);
};

export const open = (
  key: Buffer,
  sealed: Uint8Array,
  context: string,
): Effect.Effect<string, SecretUnreadable> =>
  Effect.try({
    try: () => {
      const bytes = Buffer.from(sealed);
      if (bytes[0] !== VERSION) throw new Error(`unknown version ${bytes[0]}`);
      const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(1, 13));
      decipher.setAAD(Buffer.from(context, "utf8"));
      decipher.setAuthTag(bytes.subarray(13, 29));
      return Buffer.concat([decipher.update(bytes.subarray(29)), decipher.final()]).toString("utf8");
    },
    catch: () =>
      new SecretUnreadable({
        message: `the signing secret of ${context} does not decrypt with this deployment's WEBHOOK_SECRETS_KEY`,
      }),
  });

export class SecretBox extends Context.Service<
  SecretBox,
  {
    readonly seal: (plaintext: string, context: string) => Buffer;
    readonly open: (sealed: Uint8Array, context: string) => Effect.Effect<string, SecretUnreadable>;
  }
>()("SecretBox") {
  static readonly layer = (encodedKey: Redacted.Redacted<string>) =>
    Layer.effect(
      SecretBox,
      Effect.map(parseSecretsKey(Redacted.value(encodedKey)), (key) => {
        // Opened secrets are kept in memory (this process holds the key anyway), so a busy endpoint's
        // deliveries do not each pay for a decryption.
        // Keyed by context, holding the sealed bytes too: a hit is a byte comparison, no encoding.
        const opened = new Map<string, Array<{ readonly sealed: Buffer; readonly plaintext: string }>>();
        return {
          seal: (plaintext: string, context: string) => seal(key, plaintext, context),
          open: (sealed: Uint8Array, context: string) => {
            const entries = opened.get(context);
            const hit = entries?.find((entry) => entry.sealed.equals(sealed));
            if (hit !== undefined) return Effect.succeed(hit.plaintext);
            return Effect.tap(open(key, sealed, context), (plaintext) =>
              Effect.sync(() => {
                if (opened.size >= 10_000) opened.clear();
                // A context holds its current and previous secrets: keep the last few only.
                const kept = (opened.get(context) ?? []).slice(-3);
                opened.set(context, [...kept, { sealed: Buffer.from(sealed), plaintext }]);
              }),
            );
          },
        };
      }),
    );
}
