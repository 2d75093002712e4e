/**
 * A power cut of the local stack: `npm start`, open/authorize/fund a mandate, charge it, advance the test
 * clock, and within a second SIGKILL every process (supervisor with the service, indexer, anvil, every
 * Postgres process). The next `npm start` must come up ready with the local chain, the indexer and the
 * service's records in agreement, keep the merchant, its key, its endpoints and its catalogue, and work.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { afterAll, describe, expect, it } from "vitest";
import { rpc } from "../../scripts/stack/anvil.ts";
import { alive } from "../../scripts/stack/processes.ts";
import { localChain, scratchDir } from "../../scripts/stack/scratch-stack.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { newAddress } from "./helpers.ts";

const KEY = `sk_test_crash${"9876543210".repeat(3)}`;
const scratch = scratchDir("crash");
const { dataDir, chainsConfig } = scratch;
const children: ChildProcess[] = [];

interface Started {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

const startNpmStart = async (env: Record<string, string>): Promise<Started> => {
  const child = spawn(process.execPath, ["scripts/start.ts"], {
    env: { ...process.env, ...env, LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  await Promise.race([
    waitFor(async () => output.includes("Ctrl-C stops everything"), {
      timeoutMs: 150_000,
      intervalMs: 100,
      what: "npm start to print its ready banner",
    }),
    exited.then((code) => {
      throw new Error(`npm start exited with ${code}:\n${output}`);
    }),
  ]);
  return { child, output: () => output, exited };
};

/** SIGKILL for every process of the stack at once: supervisor, indexer, anvil, postmaster and backends. */
const powerCut = (supervisor: ChildProcess) => {
  const stackFile = JSON.parse(readFileSync(join(dataDir, "stack.json"), "utf8")) as { processes: number[] };
  const postmaster = Number.parseInt(
    readFileSync(join(dataDir, "postgres", "postmaster.pid"), "utf8").split("\n")[0] ?? "",
    10,
  );
  const backends = execFileSync("ps", ["-o", "pid=", "--ppid", String(postmaster)])
    .toString()
    .split("\n")
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => Number.isInteger(pid));
  const pids = [supervisor.pid ?? -1, ...stackFile.processes, postmaster, ...backends];
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  return pids;
};

const query = <A extends object>(url: string, text: string, params: unknown[] = []) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      return yield* sql.unsafe<A>(text, params);
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))),
  );

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGINT");
      await new Promise((resolve) => child.once("exit", resolve));
    }
  }
  scratch.remove();
});

describe("the local stack after a power cut", () => {
  it("comes back ready, consistent and usable after SIGKILL of every process right after a charge and a clock advance", async () => {
    const [port, pgPort, anvilPort] = [await freePort(), await freePort(), await freePort()];
    // A fixed anvil port: the restarted stack must find the chain where the first one ran it.
    writeFileSync(chainsConfig, JSON.stringify({ chains: [localChain({ local: { port: anvilPort } })] }));
    const env = {
      DATA_DIR: dataDir,
      CHAINS_CONFIG: chainsConfig,
      PORT: String(port),
      PG_PORT: String(pgPort),
      DEV_API_KEY: KEY,
      // A save every 20 s: the charge, the clock advance and their indexing fit between two saves on a
      // loaded machine too (at 5 s they missed five windows in a row at a load of 12).
      LOCAL_CHAIN_SAVE_SECONDS: "20",
    };
    const base = `http://127.0.0.1:${port}`;
    const call = async (path: string, body?: unknown) => {
      const response = await fetch(`${base}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: {
          authorization: `Bearer ${KEY}`,
          ...(body === undefined
            ? {}
            : { "content-type": "application/json", "idempotency-key": randomUUID() }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, text, json: text ? JSON.parse(text) : undefined };
    };
    /** Open, fund and authorize a mandate, ready to charge. */
    const authorizedMandate = async () => {
      const mandate = await call("/v1/mandates", {
        cap_decimal: "25",
        period: "month",
        customer: "cus_crash",
      });
      expect(mandate.status, mandate.text).toBe(200);
      expect(
        (await call(`/v1/test/mandates/${mandate.json.id}/fund`, { amount_decimal: "100" })).status,
      ).toBe(200);
      const authorized = await call(`/v1/test/mandates/${mandate.json.id}/authorize`, {});
      expect(authorized.status, authorized.text).toBe(200);
      return mandate.json as { id: string };
    };
    /** Charges a mandate; returns the charge as the API answered. */
    const charged = async (mandate: { id: string }) => {
      const charge = await call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
      expect(charge.status, charge.text).toBe(200);
      return { mandate, charge: charge.json as { id: string } };
    };
    const chargedMandate = async () => charged(await authorizedMandate());

    // First life: a merchant with a payout address, an endpoint, a price, a charged mandate.
    const first = await startNpmStart(env);
    expect((await call("/v1/merchant/chains", { chain: 31337, payout_address: newAddress() })).status).toBe(
      200,
    );
    const endpoint = await call("/v1/webhook_endpoints", {
      url: "http://127.0.0.1:9/hook",
      events: ["charge.succeeded"],
    });
    expect(endpoint.status, endpoint.text).toBe(200);
    const price = await call("/v1/prices", {
      product_name: "Crash plan",
      amount_decimal: "5",
    });
    expect(price.status, price.text).toBe(200);
    // The worst moment: right after anvil saved its state file, a charge and a clock advance that the
    // file cannot hold yet (anvil saves every few seconds), then the power cut.
    const stateFile = join(dataDir, "anvil-31337.json");
    const savedAt = () => (existsSync(stateFile) ? statSync(stateFile).mtimeMs : 0);
    let killed: number[] = [];
    for (let attempt = 0; attempt < 5 && killed.length === 0; attempt++) {
      // Signed beforehand: only the charge and the clock advance must fit between two saves.
      const mandate = await authorizedMandate();
      const previous = savedAt();
      await waitFor(async () => savedAt() !== previous, {
        timeoutMs: 30_000,
        intervalMs: 20,
        what: "a state save",
      });
      // anvil truncates the file and writes it in chunks, each moving its mtime (a loaded machine takes
      // seconds over it): the save is over once the mtime stands still.
      let last = { at: savedAt(), since: Date.now() };
      await waitFor(
        async () => {
          const at = savedAt();
          if (at !== last.at) last = { at, since: Date.now() };
          return Date.now() - last.since >= 500;
        },
        { timeoutMs: 30_000, intervalMs: 20, what: "the state save to end" },
      );
      const saved = savedAt();
      const { charge } = await charged(mandate);
      expect((await call("/v1/test/clock/advance", { seconds: 40 * 86_400 })).status).toBe(200);
      // The fault must land where intended: the indexer and the service have recorded the charge's
      // block (charge.succeeded comes from the indexed fact), which the state file does not hold yet.
      await waitFor(async () => (await call(`/v1/charges/${charge.id}`)).json?.status === "succeeded", {
        timeoutMs: 15_000,
        intervalMs: 20,
        what: "the charge to be indexed and reported",
      });
      if (savedAt() === saved) killed = powerCut(first.child);
    }
    expect(killed.length).toBeGreaterThan(0);
    await first.exited;
    await waitFor(async () => killed.every((pid) => !alive(pid)), {
      timeoutMs: 10_000,
      what: "every pid gone",
    });

    // Second life: ready, and it says what it did with the chain.
    const second = await startNpmStart(env);
    expect((await fetch(`${base}/ready`)).status).toBe(200);
    const recovered = second.output().match(/^Local chain 31337: .*$/m)?.[0];
    expect(recovered, second.output()).toMatch(/lost blocks/);
    console.log(recovered);

    // Kept: the key (these calls use it), the merchant's chain, its endpoint and its price.
    expect((await call("/v1/merchant/chains")).json.data).toHaveLength(1);
    expect((await call(`/v1/webhook_endpoints/${endpoint.json.id}`)).status).toBe(200);
    expect((await call(`/v1/prices/${price.json.id}`)).status).toBe(200);

    // Agreement: every charge the service holds as made is on the chain in the same block, and the
    // indexer's charges are the service's.
    const stackFile = JSON.parse(readFileSync(join(dataDir, "stack.json"), "utf8")) as {
      databaseUrl: string;
    };
    const anvil = `http://127.0.0.1:${anvilPort}`;
    const agreement = async () => {
      const billing = await query<{ onchain_id: string; block_number: string; block_hash: string }>(
        stackFile.databaseUrl,
        `SELECT onchain_id, block_number::text, block_hash FROM billing.charges
         WHERE chain_id = 31337 AND status <> 'failed' AND block_number IS NOT NULL ORDER BY onchain_id`,
      );
      for (const charge of billing) {
        const block = (await rpc(anvil, "eth_getBlockByNumber", [
          `0x${BigInt(charge.block_number).toString(16)}`,
          false,
        ])) as { hash: string } | null;
        expect(block?.hash, `charge ${charge.onchain_id} block`).toBe(charge.block_hash);
      }
      const indexed = await query<{ charge_id: string }>(
        stackFile.databaseUrl,
        "SELECT charge_id FROM onchain.charge WHERE chain_id = 31337 ORDER BY charge_id",
      );
      expect(billing.map((c) => c.onchain_id)).toEqual(indexed.map((c) => c.charge_id));
    };
    await waitFor(
      async () =>
        agreement().then(
          () => true,
          () => false,
        ),
      { timeoutMs: 30_000, intervalMs: 250, what: "the service's charges to match the chain's" },
    );
    await agreement();

    // Usable: a new mandate is authorized (the relayer is not stuck) and charged, and its event arrives.
    const { charge } = await chargedMandate();
    await waitFor(
      async () =>
        (
          (await call("/v1/events?type=charge.succeeded&limit=100")).json.data as Array<{
            data: { object: { id: string } };
          }>
        ).some((event) => event.data.object.id === charge.id),
      { timeoutMs: 30_000, intervalMs: 200, what: "charge.succeeded for the charge after the restart" },
    );
    await agreement();
    expect(existsSync(join(dataDir, "stack.json"))).toBe(true);
  }, 240_000);
});
