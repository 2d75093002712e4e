/**
 * Fault injection at a billing boundary, on a stack of its own (the faults would disturb the shared one):
 * Postgres restarted, a service process SIGKILLed while another takes over, the RPC frozen for 30 s, the
 * indexer SIGKILLed and restarted while it catches up. After each: no lost event, no double charge, no
 * second invoice for a period, and `/ready` back to 200.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rpc } from "../../scripts/stack/anvil.ts";
import { localChain, type ScratchStack, startScratchStack } from "../../scripts/stack/scratch-stack.ts";
import type { RunningStack } from "../../scripts/stack/stack.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { newAddress } from "./helpers.ts";
import { type HeldLock, holdLock } from "./lock-holder.ts";

const MONTH = 31 * 86_400;
const SUBSCRIPTIONS = 10;
const KEY = `sk_test_faults${"1357924680".repeat(3)}`;

let scratch: ScratchStack;
let stack: RunningStack;
const children: ChildProcess[] = [];
const ids: string[] = [];
let periods = 0;

const query = <A extends object>(text: string, params: unknown[] = []) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      return yield* sql.unsafe<A>(text, params);
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack.databaseUrl), maxConnections: 1 }))),
  );

const call = async (path: string, body?: unknown, base = stack.apiUrl) => {
  const response = await fetch(`${base}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: {
      authorization: `Bearer ${KEY}`,
      ...(body === undefined ? {} : { "content-type": "application/json", "idempotency-key": randomUUID() }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(90_000),
  });
  const text = await response.text();
  return { status: response.status, text, json: text ? JSON.parse(text) : undefined };
};

const ready = async (base = stack.apiUrl) =>
  (await fetch(`${base}/ready`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined))?.status ===
  200;

const paidInvoices = async () =>
  Number(
    (
      await query<{ n: string }>(
        "SELECT count(*)::text AS n FROM billing.invoices WHERE subscription_id = ANY($1) AND status = 'paid'",
        [ids],
      )
    )[0]?.n,
  );

/** The invariants after every fault, for every period billed so far. */
const expectConsistent = async () => {
  await waitFor(async () => (await paidInvoices()) === SUBSCRIPTIONS * periods && (await ready()), {
    timeoutMs: 120_000,
    intervalMs: 250,
    what: `${SUBSCRIPTIONS * periods} paid invoices and /ready 200`,
  }).catch(async (error: unknown) => {
    const readiness = await fetch(`${stack.apiUrl}/ready`).then((r) => r.text(), String);
    const states = await query(
      `SELECT 'invoice' AS what, period, status, count(*) FROM billing.invoices WHERE subscription_id = ANY($1) GROUP BY 1, 2, 3
       UNION ALL SELECT 'charge', c.period, c.status || coalesce(':' || c.failure_code, ''), count(*) FROM billing.charges c
         JOIN billing.subscriptions s ON s.mandate_id = c.mandate_id WHERE s.id = ANY($1) GROUP BY 1, 2, 3
       UNION ALL SELECT 'tx', block_number, status, count(*) FROM billing.relayer_transactions GROUP BY 1, 2, 3
       UNION ALL SELECT 'onchain', period, status, count(*) FROM onchain.charge GROUP BY 1, 2, 3
       UNION ALL SELECT 'head', block_number, block_hash, 1 FROM onchain.chain_head
       UNION ALL SELECT 'sub', next_billing_at, status, count(*) FROM billing.subscriptions WHERE id = ANY($1) GROUP BY 1, 2, 3`,
      [ids],
    );
    throw new Error(
      `${error}; /ready: ${readiness}; ${JSON.stringify(states, (_, v) => (typeof v === "bigint" ? String(v) : v))}`,
    );
  });
  const invoices = await query<{ n: string }>(
    `SELECT count(*)::text AS n FROM billing.invoices WHERE subscription_id = ANY($1)
     GROUP BY subscription_id, period`,
    [ids],
  );
  expect(invoices).toHaveLength(SUBSCRIPTIONS * periods);
  expect(invoices.every((row) => row.n === "1")).toBe(true);
  const charges = await query<{ onchain_id: string; n: string }>(
    `SELECT min(c.onchain_id) AS onchain_id, count(*)::text AS n FROM billing.charges c
     JOIN billing.subscriptions s ON s.mandate_id = c.mandate_id
     WHERE s.id = ANY($1) AND c.status <> 'failed' GROUP BY c.mandate_id, c.period`,
    [ids],
  );
  expect(charges).toHaveLength(SUBSCRIPTIONS * periods);
  expect(charges.every((row) => row.n === "1")).toBe(true);
  // The chain made exactly these charges, one per mandate and period.
  const mandates = await query<{ onchain_id: string }>(
    `SELECT m.onchain_id FROM billing.mandates m JOIN billing.subscriptions s ON s.mandate_id = m.id
     WHERE s.id = ANY($1)`,
    [ids],
  );
  const onchain = await query<{ n: string; periods: string }>(
    `SELECT count(*)::text AS n, count(DISTINCT (mandate_id, period))::text AS periods FROM onchain.charge
     WHERE chain_id = 31337 AND mandate_id = ANY($1)`,
    [mandates.map((m) => m.onchain_id)],
  );
  expect(onchain[0]).toEqual({
    n: String(SUBSCRIPTIONS * periods),
    periods: String(SUBSCRIPTIONS * periods),
  });
  // Every outcome reported once: one invoice.paid per invoice, one charge.succeeded per charge.
  const reported = await query<{ type: string; n: string; objects: string }>(
    `SELECT type, count(*)::text AS n, count(DISTINCT payload #>> '{data,object,id}')::text AS objects
     FROM billing.events WHERE type IN ('invoice.paid', 'charge.succeeded') GROUP BY type ORDER BY type`,
  );
  expect(reported).toEqual([
    {
      type: "charge.succeeded",
      n: String(SUBSCRIPTIONS * periods),
      objects: String(SUBSCRIPTIONS * periods),
    },
    { type: "invoice.paid", n: String(SUBSCRIPTIONS * periods), objects: String(SUBSCRIPTIONS * periods) },
  ]);
};

const nextBoundary = async () => {
  const advanced = await call("/v1/test/clock/advance", { seconds: MONTH });
  expect(advanced.status, advanced.text).toBe(200);
  periods++;
};

const startServiceProcess = async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ["service/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: stack.databaseUrl,
      CHAINS_CONFIG: stack.chainsFile,
      WEBHOOK_SECRETS_KEY: stack.webhookSecretsKey,
      // A replica of the local stack, which alone lets test-mode webhooks reach loopback receivers.
      WEBHOOK_TEST_ALLOW_PRIVATE_URLS: "true",
      PONDER_URL: stack.ponderUrl,
      PORT: String(port),
      LOG_LEVEL: "Error",
      // The stack's relayer: without its key a process could not send the boundary's charges at all.
      RELAYER_PRIVATE_KEY: stack.relayerKey,
    },
    stdio: "ignore",
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(() => ready(url), { timeoutMs: 30_000, what: "a second service process" });
  return { child, url };
};

/** The local TCP ports of a process's sockets (Linux /proc): what Postgres shows as its backends' client ports. */
const localPortsOf = (pid: number): Set<number> => {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    const target = (() => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        return ""; // closed meanwhile
      }
    })();
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (inode !== undefined) inodes.add(inode);
  }
  const ports = new Set<number>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"])
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const columns = line.trim().split(/\s+/);
      const port = columns[1]?.split(":")[1];
      if (columns[9] !== undefined && inodes.has(columns[9]) && port !== undefined)
        ports.add(Number.parseInt(port, 16));
    }
  return ports;
};

/**
 * The backends billing a boundary that wait at `gate` (the relayer account's lock, which a boundary's
 * charges take once its subscriptions are locked and invoiced): each holds row locks of
 * billing.subscriptions in its open transaction.
 */
const boundaryHolders = async (gate: HeldLock) => {
  const waiting = await gate.waiting();
  if (waiting.length === 0) return [];
  return query<{ pid: number; client_port: number }>(
    `SELECT a.pid, a.client_port FROM pg_stat_activity a
     WHERE a.pid = ANY ($1::int[]) AND EXISTS (SELECT 1 FROM pg_locks l
       WHERE l.pid = a.pid AND l.granted AND l.relation = 'billing.subscriptions'::regclass)`,
    [waiting],
  );
};

beforeAll(async () => {
  scratch = await startScratchStack("faults", {
    chains: [localChain({ name: "Faults chain" })],
    devApiKey: KEY,
    logLevel: "Error",
  });
  stack = scratch.stack;
  expect((await call("/v1/merchant/chains", { chain: 31337, payout_address: newAddress() })).status).toBe(
    200,
  );
  const price = await call("/v1/prices", { product_name: "Seat", amount_decimal: "3.5", chain: 31337 });
  for (let i = 0; i < SUBSCRIPTIONS; i++) {
    const subscription = await call("/v1/subscriptions", { customer: `cus_${i}`, price: price.json.id });
    expect(subscription.status, subscription.text).toBe(200);
    ids.push(subscription.json.id);
    await call(`/v1/test/mandates/${subscription.json.mandate}/fund`, { amount_decimal: "100" });
    await call(`/v1/test/mandates/${subscription.json.mandate}/authorize`, {});
  }
  periods = 1;
  await expectConsistent();
}, 240_000);

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await scratch?.stop();
});

describe("faults at a billing boundary", () => {
  it("Postgres restarted during the boundary", async () => {
    await nextBoundary();
    await stack.restartPostgres();
    await expectConsistent();
  });

  it("a service process SIGKILLed mid-boundary while another takes over", async () => {
    const processes = [await startServiceProcess(), await startServiceProcess()];
    // The test holds the relayer account's lock: whichever process bills the boundary stops at its
    // charges, in the boundary's transaction, holding its subscriptions. When that is the stack's own
    // service (in this test's process, which cannot be killed), its connection is ended (its
    // transaction rolls back) until one of the two processes holds the boundary.
    const gate = await holdLock(
      "SELECT pg_advisory_xact_lock(hashtext($1))",
      [`relayer:31337:${privateKeyToAccount(stack.relayerKey).address.toLowerCase()}`],
      stack.databaseUrl,
    );
    const found: Array<{ readonly process: (typeof processes)[number]; readonly backend: number }> = [];
    try {
      await nextBoundary();
      await waitFor(
        async () => {
          for (const holder of await boundaryHolders(gate)) {
            const owner = processes.find((p) => localPortsOf(p.child.pid ?? -1).has(holder.client_port));
            if (owner === undefined) await query("SELECT pg_terminate_backend($1)", [holder.pid]);
            else found.push({ process: owner, backend: holder.pid });
          }
          return found.length > 0;
        },
        {
          timeoutMs: 60_000,
          intervalMs: 50,
          what: "a service process to hold the boundary at the relayer's lock",
        },
      );
      found[0]?.process.child.kill("SIGKILL");
    } finally {
      await gate.release();
    }
    const doomed = found[0];
    if (doomed === undefined) throw new Error("no process held the boundary");
    // The fault landed mid-boundary: the killed process's backend, blocked in the boundary's transaction
    // when it died, finds its client gone once it can go on, and rolls that transaction back.
    const backend = doomed.backend;
    await waitFor(
      async () => (await query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [backend])).length === 0,
      { timeoutMs: 30_000, what: "the killed process's backend to end" },
    );
    await expectConsistent();
    const survivor = processes.find((p) => p !== doomed.process);
    if (survivor === undefined) throw new Error("no survivor");
    expect(await ready(survivor.url)).toBe(true);
  });

  it("the RPC frozen for 30 s during charges and billing: 503 chain_unavailable, never 500, then recovery", async () => {
    const extra = await call("/v1/mandates", { cap_decimal: "5", period: "month", customer: "cus_extra" });
    await call(`/v1/test/mandates/${extra.json.id}/fund`, { amount_decimal: "10" });
    await call(`/v1/test/mandates/${extra.json.id}/authorize`, {});
    await nextBoundary();
    const anvil = stack.anvilPids.get(31337) ?? -1;
    process.kill(anvil, "SIGSTOP");
    const frozenUntil = Date.now() + 30_000;
    const statuses: number[] = [];
    try {
      while (Date.now() < frozenUntil - 5_000) {
        const charge = await call(`/v1/mandates/${extra.json.id}/charges`, { amount_decimal: "1" });
        statuses.push(charge.status);
        if (charge.status !== 200) expect(charge.json.error.code, charge.text).toBe("chain_unavailable");
        statuses.push((await call(`/v1/subscriptions/${ids[0]}`)).status);
      }
    } finally {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, frozenUntil - Date.now())));
      process.kill(anvil, "SIGCONT");
    }
    expect(statuses).toContain(503);
    expect(statuses.every((status) => status === 200 || status === 503)).toBe(true);
    await expectConsistent();
  }, 240_000);

  it("the indexer SIGKILLed while billing goes on, and again while it catches up", async () => {
    process.kill(stack.ponderPid(), "SIGKILL");
    await nextBoundary();
    // A history to catch up on: the boundary's charges and some hundreds of blocks after them.
    await rpc(stack.chains[0]?.rpc?.http[0] ?? "", "anvil_mine", ["0x1f4"]);
    const restarting = stack.restartPonder();
    const ponderPort = new URL(stack.ponderUrl).port;
    const catchingUp = () => {
      try {
        const found = execFileSync("pgrep", ["-f", `ponder.js.*--port ${ponderPort}`]).toString();
        return Number.parseInt(found.trim().split("\n")[0] ?? "", 10);
      } catch {
        return Number.NaN; // pgrep exits 1 when nothing matches
      }
    };
    await waitFor(async () => Number.isInteger(catchingUp()), { timeoutMs: 30_000, what: "the new indexer" });
    await waitFor(
      async () => (await fetch(`${stack.ponderUrl}/health`).catch(() => undefined))?.ok === true,
      {
        timeoutMs: 60_000,
        intervalMs: 50,
        what: "the new indexer's server",
      },
    );
    process.kill(catchingUp(), "SIGKILL");
    await expect(restarting).rejects.toThrow();
    await stack.restartPonder();
    await expectConsistent();
  }, 240_000);
});
