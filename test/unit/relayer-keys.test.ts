/**
 * Each chain's relayer key (service/chains/relayer-keys.ts): RELAYER_PRIVATE_KEY by default, a variable
 * the chain names, or a V3 keystore file (written here by @ethereumjs/wallet as geth and `cast wallet
 * import` write one) and its password's variable; every problem one line naming the chain.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Wallet } from "@ethereumjs/wallet";
import { ConfigProvider, Effect, Redacted } from "effect";
import type { Hex } from "viem";
import { generatePrivateKey } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RelayerKeySource } from "../../service/chains/config.ts";
import { relayerKeysOf } from "../../service/chains/relayer-keys.ts";

const dir = mkdtempSync(join(tmpdir(), "relayer-keys-"));
const keystoreKey = generatePrivateKey();
const keystore = join(dir, "base.json");
const PASSWORD = "correct horse battery staple";

beforeAll(async () => {
  const wallet = Wallet.fromPrivateKey(Buffer.from(keystoreKey.slice(2), "hex"));
  // A light scrypt (n = 2^12) keeps the test quick; real keystores use 2^18, which decode the same way.
  writeFileSync(keystore, await wallet.toV3String(PASSWORD, { kdf: "scrypt", n: 4096 }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const chain = (id: number, relayer?: RelayerKeySource) => ({
  id,
  name: `chain ${id}`,
  ...(relayer === undefined ? {} : { relayer }),
});

const run = (chains: ReadonlyArray<ReturnType<typeof chain>>, env: Record<string, string>, fallback?: Hex) =>
  Effect.runPromise(
    relayerKeysOf(chains, fallback === undefined ? undefined : Redacted.make(fallback)).pipe(
      Effect.map((keys) => new Map(Array.from(keys, ([id, key]) => [id, Redacted.value(key)]))),
      Effect.result,
      Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })),
    ),
  );

describe("relayer keys per chain", () => {
  it("gives chains without a relayer block the default key, and others their own", async () => {
    const fallback = generatePrivateKey();
    const own = generatePrivateKey();
    const result = await run(
      [
        chain(1),
        chain(8453, { key_env: "RELAYER_KEY_BASE" }),
        chain(10, { keystore, password_env: "OP_PASSWORD" }),
      ],
      { RELAYER_KEY_BASE: own, OP_PASSWORD: PASSWORD },
      fallback,
    );
    expect(result._tag === "Success" && result.success).toEqual(
      new Map([
        [1, fallback],
        [8453, own],
        [10, keystoreKey],
      ]),
    );
  });

  it("leaves a chain without any key out (the service sends nothing there)", async () => {
    const result = await run([chain(1)], {});
    expect(result._tag === "Success" && result.success.size).toBe(0);
  });

  it("refuses every bad source at once, one line per chain, never showing a secret", async () => {
    const result = await run(
      [
        chain(1, { key_env: "UNSET_KEY" }),
        chain(2, { key_env: "BAD_KEY" }),
        chain(3, { keystore, password_env: "WRONG_PASSWORD" }),
        chain(4, { keystore: join(dir, "missing.json"), password_env: "OP_PASSWORD" }),
        chain(5, { keystore, password_env: "UNSET_PASSWORD" }),
      ],
      { BAD_KEY: "0x1234", WRONG_PASSWORD: "not it", OP_PASSWORD: PASSWORD },
    );
    expect(result._tag).toBe("Failure");
    const problems = result._tag === "Failure" ? result.failure.problems : [];
    expect(problems).toEqual([
      "chain 1 (chain 1): relayer.key_env: UNSET_KEY is not set",
      "chain 2 (chain 2): relayer.key_env: BAD_KEY must be 0x followed by 64 hex digits (a 32-byte private key)",
      expect.stringMatching(/^chain 3 \(chain 3\): keystore .*base\.json: Key derivation failed/),
      expect.stringMatching(/^chain 4 \(chain 4\): keystore: cannot read .*missing\.json \(ENOENT/),
      "chain 5 (chain 5): UNSET_PASSWORD is not set",
    ]);
    expect(problems.join("\n")).not.toContain(PASSWORD);
  });
});
