import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { inject } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";

export const stack = () => inject("stack");

export interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
  readonly json: any;
}

export const api = async (
  path: string,
  options: {
    readonly method?: string;
    readonly key?: string | null;
    readonly body?: unknown;
    readonly rawBody?: string;
    readonly idempotencyKey?: string | null;
    readonly headers?: Record<string, string>;
    /** Another service process on the stack's database; default: the stack's own. */
    readonly baseUrl?: string;
  } = {},
): Promise<ApiResponse> => {
  const method =
    options.method ?? (options.body !== undefined || options.rawBody !== undefined ? "POST" : "GET");
  const key = options.key === undefined ? stack().apiKey : options.key;
  const headers: Record<string, string> = { ...options.headers };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (method === "POST" && options.idempotencyKey !== null)
    headers["idempotency-key"] = options.idempotencyKey ?? randomUUID();
  if (options.body !== undefined) headers["content-type"] ??= "application/json";
  const response = await fetch(`${options.baseUrl ?? stack().apiUrl}${path}`, {
    method,
    headers,
    ...(options.rawBody !== undefined
      ? { body: options.rawBody }
      : options.body !== undefined
        ? { body: JSON.stringify(options.body) }
        : {}),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
};

/** Runs an effect that needs SQL on the database at `url` (a scratch stack's, or the suite's). */
export const withDatabase = <A, E>(url: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.runPromise(
    effect.pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))),
  );

/** Runs SQL against the database at `url` (read-only checks of what the API did). */
export const queryAt =
  (url: string) =>
  <A extends object>(text: string, params: unknown[] = []): Promise<readonly A[]> =>
    withDatabase(
      url,
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<A>(text, params)),
    );

/** Runs SQL against the stack's database. */
export const query = <A extends object>(text: string, params: unknown[] = []): Promise<readonly A[]> =>
  queryAt(stack().databaseUrl)<A>(text, params);

/** Runs a statement without firing triggers: no NOTIFY reaches any process (a change behind the service's back). */
export const silently = (statement: (sql: PgClient.PgClient) => Effect.Effect<unknown, unknown>) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient;
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SET LOCAL session_replication_role = replica`;
          yield* statement(sql);
        }),
      );
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack().databaseUrl), maxConnections: 1 }))),
  );

/**
 * Runs `round` until one run starts and ends in the same minute of the database's clock, by which the
 * request counters count (per calendar minute): a round that straddled two minutes spread its requests
 * over two counters and proves nothing. Two runs at most (a round takes seconds).
 */
export const withinOneMinute = async <A>(round: () => Promise<A>): Promise<A> => {
  const minute = async () =>
    (await query<{ minute: string }>("SELECT date_trunc('minute', now())::text AS minute"))[0]?.minute;
  for (let run = 1; ; run++) {
    const before = await minute();
    const result = await round();
    if ((await minute()) === before) return result;
    if (run === 2) throw new Error("two rounds in a row straddled a minute");
  }
};

/**
 * Runs `take` (statements that take locks: row locks, an advisory lock) in a transaction of the test's
 * own on the stack's database and keeps it open; resolves, once they are held, to the release.
 */
export const holdInTransaction = async (
  take: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>,
): Promise<() => Promise<void>> => {
  const locked = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  const held = Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* take(sql);
          locked.resolve();
          yield* Effect.promise(() => release.promise);
        }),
      );
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack().databaseUrl), maxConnections: 1 }))),
  );
  held.catch(locked.reject);
  await locked.promise;
  return async () => {
    release.resolve();
    await held;
  };
};

const run = promisify(execFile);

/** The operator CLI on the database at `url`, as `npm run cli -- …` runs it. */
export const cliAt = async (url: string, ...args: string[]) => {
  const result = await run(process.execPath, ["service/cli.ts", ...args], {
    env: { ...process.env, DATABASE_URL: url },
  });
  return result.stdout.trim();
};

/** The operator CLI on the stack's database. */
export const cli = (...args: string[]) => cliAt(stack().databaseUrl, ...args);

/** A new merchant and a key of it, made by the operator CLI (on the stack's database by default). */
export const newMerchantWithKey = async (mode: "test" | "live" = "test", url = stack().databaseUrl) => {
  const [merchantId] = (
    await cliAt(url, "merchants", "create", "--name", `Merchant ${randomUUID().slice(0, 8)}`)
  ).split("\t");
  const [, key] = (
    await cliAt(url, "keys", "create", "--merchant", String(merchantId), "--mode", mode)
  ).split("\t");
  return { merchantId: String(merchantId), key: String(key) };
};

/**
 * The console's session cookie as the stack sets it: `__Host-` prefixed (loopback is a secure context,
 * so it is `Secure` even over plain http).
 */
export const CONSOLE_SESSION_COOKIE = "__Host-console_session";

/** The `cookie` request header that carries the session a sign-in's `Set-Cookie` answered. */
export const sessionCookieOf = (setCookie: string | null): string => {
  const value = new RegExp(`(?:^|, )${CONSOLE_SESSION_COOKIE}=([^;]*)`).exec(setCookie ?? "")?.[1];
  if (!value) throw new Error(`no session cookie in ${setCookie}`);
  return `${CONSOLE_SESSION_COOKIE}=${value}`;
};

/** A fresh payout address: each belongs to one merchant. */
export const newAddress = () => privateKeyToAccount(generatePrivateKey()).address;

export const expectErrorShape = (body: unknown) => {
  const error = (body as { error?: Record<string, unknown> }).error;
  if (!error) throw new Error(`not an error body: ${JSON.stringify(body)}`);
  const keys = Object.keys(error).sort();
  if (JSON.stringify(keys) !== JSON.stringify(["code", "message", "param", "type"]))
    throw new Error(`error body keys: ${keys.join(",")}`);
  if (typeof error.code !== "string" || typeof error.message !== "string" || typeof error.type !== "string")
    throw new Error(`error body types: ${JSON.stringify(error)}`);
  if (!(error.param === null || typeof error.param === "string"))
    throw new Error("param must be string or null");
  return error as { type: string; code: string; message: string; param: string | null };
};

export interface EventOf {
  readonly id: string;
  readonly type: string;
  readonly data: { readonly object: Record<string, unknown> };
}

/** A merchant of its own with chain 31337 configured, so events and lists are the calling test's alone. */
export const merchantOnTestChain = async () => {
  const { merchantId, key } = await newMerchantWithKey("test");
  const payoutAddress = newAddress();
  const configured = await api("/v1/merchant/chains", {
    key,
    body: { chain: 31337, payout_address: payoutAddress },
  });
  if (configured.status !== 200) throw new Error(`chain 31337 not configured: ${configured.text}`);
  const call = (path: string, body?: unknown) => api(path, body === undefined ? { key } : { key, body });
  const events = async (type: string) =>
    (await call(`/v1/events?type=${type}&limit=100`)).json.data as EventOf[];
  /** Waits until at least `count` events of `type` whose object matches have been raised. */
  const waitForEvents = async (
    type: string,
    count: number,
    match: (object: Record<string, unknown>) => boolean,
  ) => {
    let found: EventOf[] = [];
    await waitFor(
      async () => {
        found = (await events(type)).filter((e) => match(e.data.object));
        return found.length >= count;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: `${count} ${type}` },
    );
    return found;
  };
  const advance = (seconds: number) => call("/v1/test/clock/advance", { seconds });
  return { merchantId, key, payoutAddress, call, events, waitForEvents, advance };
};
