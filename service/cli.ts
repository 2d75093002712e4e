/**
 * Operator CLI: `npm run cli -- <command>`. Talks to the service's database directly: DATABASE_URL,
 * or the database of the running local stack (recorded in .data/stack.json by `npm start`).
 *
 *   merchants create --name "Acme"          create a merchant
 *   merchants list
 *   keys create --merchant mer_… --mode test|live [--restricted]   create an API key (shown once);
 *                                            --restricted: rk_…, read-only (for finance)
 *   keys list --merchant mer_…
 *   keys revoke key_…
 *   gas totals [--chain 8453] [--since 2026-11-01]   what the relayer paid per chain (mined and reverted)
 */
import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Cause, Effect, Exit, Layer } from "effect";
import { formatEther } from "viem";
import { ApiKeys } from "./auth/api-keys.ts";
import { GasCosts } from "./chains/gas-costs.ts";
import { databaseLayer } from "./db/client.ts";
import { runMigrations } from "./db/migrations.ts";
import { Merchants } from "./merchants/merchants.ts";

export const STACK_FILE = ".data/stack.json";

const USAGE = `usage: npm run cli -- <command>
  merchants create --name <name>
  merchants list
  keys create --merchant <mer_id> --mode <test|live> [--restricted]
  keys list --merchant <mer_id>
  keys revoke <key_id>
  gas totals [--chain <chain_id>] [--since <date or time, ISO 8601>]`;

const databaseUrl = (): string | undefined => {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  if (existsSync(STACK_FILE))
    return (JSON.parse(readFileSync(STACK_FILE, "utf8")) as { databaseUrl?: string }).databaseUrl;
  return undefined;
};

const program = (argv: string[]) =>
  Effect.gen(function* () {
    const { positionals, values } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        name: { type: "string" },
        merchant: { type: "string" },
        mode: { type: "string" },
        restricted: { type: "boolean" },
        chain: { type: "string" },
        since: { type: "string" },
      },
    });
    const [group, command, target] = positionals;
    const merchants = yield* Merchants;
    const keys = yield* ApiKeys;
    const line = (text: string) => Effect.sync(() => console.log(text));

    if (group === "merchants" && command === "create" && values.name) {
      const merchant = yield* merchants.create(values.name);
      return yield* line(`${merchant.id}\t${merchant.name}`);
    }
    if (group === "merchants" && command === "list") {
      for (const m of yield* merchants.list) yield* line(`${m.id}\t${m.name}\t${m.created_at.toISOString()}`);
      return;
    }
    if (
      group === "keys" &&
      command === "create" &&
      values.merchant &&
      (values.mode === "test" || values.mode === "live")
    ) {
      const created = yield* keys.create({
        merchantId: values.merchant,
        livemode: values.mode === "live",
        restricted: values.restricted === true,
      });
      yield* line(`${created.record.id}\t${created.secret}`);
      return yield* Effect.sync(() => console.error("Store this key now: it is not shown again."));
    }
    if (group === "keys" && command === "list" && values.merchant) {
      for (const k of yield* keys.list(values.merchant))
        yield* line(
          `${k.id}\t${k.livemode ? "live" : "test"}\t${k.restricted ? "restricted" : "secret"}\t${k.redacted}\t${k.revoked_at ? `revoked ${k.revoked_at.toISOString()}` : "active"}`,
        );
      return;
    }
    if (group === "gas" && command === "totals") {
      const chainId = values.chain === undefined ? undefined : Number(values.chain);
      const since = values.since === undefined ? undefined : new Date(values.since);
      if (
        (chainId !== undefined && !Number.isSafeInteger(chainId)) ||
        (since && Number.isNaN(since.getTime()))
      )
        return yield* Effect.sync(() => {
          console.error("--chain takes a chain id, --since a date or time (ISO 8601).");
          process.exitCode = 2;
        });
      const totals = yield* (yield* GasCosts).chainTotals({
        ...(chainId === undefined ? {} : { chainId }),
        ...(since === undefined ? {} : { since }),
      });
      yield* line("chain\tcurrency\ttransactions\treverted\twei\tl1_fee_wei\tnative");
      for (const t of totals)
        yield* line(
          `${t.chain_id}\t${t.native_currency}\t${t.transactions}\t${t.reverted}\t${t.total_wei}\t${t.l1_fee_wei}\t${formatEther(t.total_wei)} ${t.native_currency}`,
        );
      return;
    }
    if (group === "keys" && command === "revoke" && target) {
      const key = yield* keys.revoke(target);
      return yield* line(`${key.id}\trevoked`);
    }
    return yield* Effect.sync(() => {
      console.error(USAGE);
      process.exitCode = 2;
    });
  });

if (import.meta.main) {
  const url = databaseUrl();
  if (url === undefined) {
    console.error("No database: set DATABASE_URL, or start the local stack with `npm start` first.");
    process.exit(2);
  }
  const layer = Layer.mergeAll(ApiKeys.layer, Merchants.layer, GasCosts.layer).pipe(
    Layer.provide(Layer.effectDiscard(runMigrations).pipe(Layer.provideMerge(databaseLayer(url, 2)))),
  );
  const exit = await Effect.runPromiseExit(program(process.argv.slice(2)).pipe(Effect.provide(layer)));
  if (Exit.isFailure(exit)) {
    const error = Cause.findErrorOption(exit.cause);
    console.error(
      error._tag === "Some"
        ? String((error.value as { message?: string }).message ?? error.value)
        : Cause.pretty(exit.cause),
    );
    process.exit(1);
  }
}
