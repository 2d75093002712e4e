/**
 * The relayer key of each chain, read once at start. A chain's `relayer` block names where it is: an
 * environment variable (`key_env`), or an encrypted keystore file (`keystore`, Web3 Secret Storage V3 as
 * geth and `cast wallet import` write it, decrypted with @ethereumjs/wallet) and the variable holding its
 * password (`password_env`). A chain without the block uses RELAYER_PRIVATE_KEY. Every problem is one
 * line naming the chain, and the service refuses to start on any.
 */
import { readFile } from "node:fs/promises";
import { Wallet } from "@ethereumjs/wallet";
import { Effect, Option, Redacted, Schema } from "effect";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { privateKeyVariable, secretVariable } from "../config/env-rules.ts";
import type { ChainConfig, RelayerKeySource } from "./config.ts";

export class RelayerKeysRefused extends Schema.TaggedError<RelayerKeysRefused>()("RelayerKeysRefused", {
  problems: Schema.Array(Schema.String),
}) {
  override get message(): string {
    return this.problems.join("\n");
  }
}

/** Chain id → its relayer key; a chain without one is absent (the service sends nothing there). */
export type RelayerKeys = ReadonlyMap<number, Redacted.Redacted<Hex>>;

type KeyChain = Pick<ChainConfig, "id" | "name" | "relayer">;

const firstLine = (error: unknown) =>
  (error instanceof Error ? error.message : String(error)).split("\n")[0]?.slice(0, 200) ?? "";

/** A variable's value; its rule broken, or unset, is the problem's text. */
const variableValue = <A>(
  config: ReturnType<typeof secretVariable | typeof privateKeyVariable>,
  name: string,
) =>
  Effect.result(config).pipe(
    Effect.flatMap((result) => {
      if (result._tag === "Failure") {
        const cause = result.failure.cause;
        return Effect.fail(cause._tag === "SourceError" ? cause.message : result.failure.message);
      }
      return Option.match(result.success, {
        onNone: () => Effect.fail(`${name} is not set`),
        onSome: (value) => Effect.succeed(value as A),
      });
    }),
  );

const fromKeystore = (path: string, passwordEnv: string) =>
  Effect.gen(function* () {
    const password = yield* variableValue<string>(secretVariable(passwordEnv), passwordEnv);
    const text = yield* Effect.tryPromise({
      try: () => readFile(path, "utf8"),
      catch: (error) => `keystore: cannot read ${path} (${firstLine(error)})`,
    });
    const wallet = yield* Effect.tryPromise({
      try: () => Wallet.fromV3(text, password, true),
      catch: (error) => `keystore ${path}: ${firstLine(error)}`,
    });
    return wallet.getPrivateKeyString() as Hex;
  });

/** The key a source names (the operator CLI reads the operator's key the same way); fails with the problem. */
export const keyFromSource = (source: RelayerKeySource): Effect.Effect<Redacted.Redacted<Hex>, string> =>
  Effect.map(
    "key_env" in source
      ? variableValue<Hex>(privateKeyVariable(source.key_env), source.key_env)
      : fromKeystore(source.keystore, source.password_env),
    (hex) => Redacted.make(hex),
  );

const keyOf = (chain: KeyChain, fallback: Redacted.Redacted<Hex> | undefined) => {
  const source = chain.relayer;
  if (source === undefined) return Effect.succeed(fallback);
  return keyFromSource(source).pipe(
    Effect.mapError((problem) => ("key_env" in source ? `relayer.key_env: ${problem}` : problem)),
  );
};

/** Every chain's key; fails with every chain's problem at once. */
export const relayerKeysOf = (
  chains: ReadonlyArray<KeyChain>,
  fallback: Redacted.Redacted<Hex> | undefined,
): Effect.Effect<RelayerKeys, RelayerKeysRefused> =>
  Effect.forEach(chains, (chain) => Effect.result(keyOf(chain, fallback)), { concurrency: "unbounded" }).pipe(
    Effect.flatMap((results) => {
      const keys = new Map<number, Redacted.Redacted<Hex>>();
      const problems: string[] = [];
      results.forEach((result, i) => {
        const chain = chains[i] as KeyChain;
        if (result._tag === "Failure") problems.push(`chain ${chain.id} (${chain.name}): ${result.failure}`);
        else if (result.success !== undefined) keys.set(chain.id, result.success);
      });
      return problems.length > 0 ? Effect.fail(new RelayerKeysRefused({ problems })) : Effect.succeed(keys);
    }),
  );

/** Each chain's relayer address (what the start checks need of the keys). */
export const relayerAddressesOf = (
  chains: ReadonlyArray<KeyChain>,
  fallback: Redacted.Redacted<Hex> | undefined,
): Effect.Effect<ReadonlyMap<number, string>, RelayerKeysRefused> =>
  Effect.map(
    relayerKeysOf(chains, fallback),
    (keys) =>
      new Map(Array.from(keys, ([id, key]) => [id, privateKeyToAccount(Redacted.value(key)).address])),
  );
