/**
 * The relayer's gas within bounds, on anvils of this file's own and the stack's database:
 * - a fee spike (`anvil_setNextBlockBaseFeePerGas`) above the chain's fee ceiling makes new transactions
 *   wait (recorded, not sent, counted), and they go out and are mined once the base fee falls;
 * - a stuck transaction is replaced never above the ceiling, at most `gas.max_replacements` times, and
 *   only while its raised fees fit the hourly budget;
 * - below `gas.low_balance_wei` the relayer alerts, below `gas.min_balance_wei` it sends nothing new,
 *   and the API (a second service process whose config has the floor) answers 503 `relayer_balance_low`;
 * - behind a node that refuses `eth_createAccessList` (a loopback proxy) gas limits come from
 *   `eth_estimateGas`, and the L1 data fee an OP-stack receipt reports is part of the recorded cost.
 * Every "not sent" rests on a positive marker: a finished tracking pass, a row, a metric.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Effect } from "effect";
import { encodeFunctionData, type Hex, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { TestUSDCAbi } from "../../abis/TestUSDC.ts";
import { type RunningAnvil, rpc, startAnvil } from "../../scripts/stack/anvil.ts";
import { LOCAL_DEPLOYER_KEY } from "../../scripts/stack/local-chain.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { ChainHeads } from "../../service/chains/chain-heads.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { Relayer, type RelayerError } from "../../service/chains/relayer.ts";
import { RelayerBalances } from "../../service/chains/relayer-balance.ts";
import { type Instruments, Metrics } from "../../service/metrics/metrics.ts";
import { deployTestUsdc } from "./chain-driver.ts";
import { api, expectErrorShape, merchantOnTestChain, query, stack } from "./helpers.ts";
import { type OpNodeProxy, startOpNodeProxy } from "./op-node-proxy.ts";
import { relayerRunner, relayerTestChain, track } from "./relayer-harness.ts";
import { startSecondService } from "./second-service.ts";

const CHAIN_ID = 31343;
const PROXIED_CHAIN_ID = 31344;
const GWEI = 10n ** 9n;
const ETHER = 10n ** 18n;
/** anvil asks a 1 gwei tip: at a 1 gwei base fee a transaction offers 2.2 gwei, under the ceiling. */
const CEILING = 3n * GWEI;
const BUDGET = 10n ** 16n;
const L1_FEE = 123_456_789_000n;
const RELAYER = privateKeyToAccount(LOCAL_DEPLOYER_KEY).address;

type Runner = ReturnType<typeof relayerRunner>;
let anvil: RunningAnvil;
let token: Hex;
let chain: ResolvedChain;
let relayer: Runner;
const runners: Runner[] = [];

const testChain = (id: number, http: string, address: Hex, gas: ResolvedChain["gas"]): ResolvedChain =>
  relayerTestChain(id, "relayer gas bounds test chain", http, address, {
    relayer_budget_wei_per_hour: BUDGET.toString(),
    ...(gas === undefined ? {} : { gas }),
  });

const runnerFor = (config: ResolvedChain) => {
  const runner = relayerRunner(config);
  runners.push(runner);
  return runner;
};

beforeAll(async () => {
  anvil = await startAnvil({ port: await freePort(), chainId: CHAIN_ID });
  token = await deployTestUsdc(anvil);
  chain = testChain(CHAIN_ID, anvil.http, token, {
    max_fee_per_gas_wei: CEILING.toString(),
    max_replacements: 5,
    low_balance_wei: ETHER.toString(),
    min_balance_wei: (ETHER / 10n).toString(),
  });
  relayer = runnerFor(chain);
});
afterAll(async () => {
  for (const runner of runners) await runner.dispose();
  await anvil?.stop();
});

const mint = encodeFunctionData({
  abi: TestUSDCAbi,
  functionName: "mint",
  args: ["0x000000000000000000000000000000000000dEaD", 1n],
});
const submit = (chainId: number, purpose: string, data: Hex = mint, to?: Hex) =>
  Effect.flatMap(Effect.service(Relayer), (r) => r.submit(chainId, { to: to ?? token, data, purpose }));
const find = (chainId: number, purpose: string) =>
  Effect.flatMap(Effect.service(Relayer), (r) => r.find(chainId, purpose));
/** A pass that replaces every unmined transaction next in line. */
const eagerTrack = track("0 millis");
/** A pass that only sends lost bytes again (nothing is old enough to replace). */
const patientTrack = track("1 hour");

/** The next block's base fee, mined into the latest block and seen by the relayer's head cache. */
const setBaseFee = async (runner: Runner, fee: bigint) => {
  await rpc(anvil.http, "anvil_setNextBlockBaseFeePerGas", [toHex(fee)]);
  await rpc(anvil.http, "evm_mine");
  await runner.run(Effect.flatMap(ChainHeads, (heads) => heads.refresh(chain)));
};

/** A counter's or gauge's value on the chain in the runner's registry (other labels as given). */
const metric = async (
  runner: Runner,
  pick: (m: Instruments) => { get: () => Promise<{ values: Array<{ labels: object; value: number }> }> },
  labels: Record<string, string> = {},
) => {
  const wanted: Record<string, string> = { chain_id: String(CHAIN_ID), ...labels };
  const { values } = await runner.run(Effect.flatMap(Metrics, (m) => Effect.promise(() => pick(m).get())));
  return (
    values.find((v) =>
      Object.entries(wanted).every(([k, want]) => (v.labels as Record<string, unknown>)[k] === want),
    )?.value ?? 0
  );
};

interface Row {
  readonly status: string;
  readonly held_reason: string | null;
  readonly max_fee_per_gas: string;
  readonly max_priority_fee_per_gas: string;
  readonly hashes: string[];
  readonly spent_wei: string | null;
  readonly l1_fee_wei: string | null;
  readonly gas_limit: string;
}
const rowOf = async (chainId: number, purpose: string) =>
  (
    await query<Row>(
      `SELECT status, held_reason, max_fee_per_gas::text, max_priority_fee_per_gas::text, hashes,
        spent_wei::text, l1_fee_wei::text, gas_limit::text
       FROM billing.relayer_transactions WHERE chain_id = $1 AND purpose = $2`,
      [chainId, purpose],
    )
  )[0];

/** One tracking pass, then whether the purpose's transaction is recorded as mined. */
const trackedMined = async (runner: Runner, chainId: number, purpose: string) => {
  await runner.run(patientTrack);
  return (await runner.run(find(chainId, purpose)))?.status === "mined";
};

const inPool = async (hash: string) => (await rpc(anvil.http, "eth_getTransactionByHash", [hash])) !== null;

describe("fee ceiling", () => {
  it("holds new transactions while the base fee is above the ceiling, and sends them once it falls", async () => {
    await setBaseFee(relayer, 20n * GWEI);
    const holdsBefore = await metric(relayer, (m) => m.relayerFeeCeilingHolds);
    const purposes = [`spike:${Date.now()}:a`, `spike:${Date.now()}:b`];
    const sent = [];
    for (const purpose of purposes) sent.push(await relayer.run(submit(CHAIN_ID, purpose)));
    for (const [n, purpose] of purposes.entries()) {
      const row = await rowOf(CHAIN_ID, purpose);
      expect(row?.held_reason).toBe("fee_ceiling");
      expect(BigInt(row?.max_fee_per_gas ?? "0")).toBeLessThanOrEqual(CEILING);
      expect(await inPool(sent[n]?.hash ?? "")).toBe(false);
    }
    expect(await metric(relayer, (m) => m.relayerFeeCeilingHolds)).toBe(holdsBefore + 2);
    // A whole tracking pass while the spike lasts sends nothing and counts nothing twice.
    await relayer.run(eagerTrack);
    for (const [n, purpose] of purposes.entries()) {
      expect((await rowOf(CHAIN_ID, purpose))?.held_reason).toBe("fee_ceiling");
      expect(await inPool(sent[n]?.hash ?? "")).toBe(false);
    }
    expect(await metric(relayer, (m) => m.relayerFeeCeilingHolds)).toBe(holdsBefore + 2);

    await setBaseFee(relayer, GWEI);
    for (const purpose of purposes)
      await waitFor(() => trackedMined(relayer, CHAIN_ID, purpose), {
        timeoutMs: 15_000,
        what: `${purpose} sent and mined once the base fee fell`,
      });
    for (const [n, purpose] of purposes.entries()) {
      const row = await rowOf(CHAIN_ID, purpose);
      expect(row?.held_reason).toBeNull();
      // The very bytes signed during the spike: nothing was signed again above the ceiling.
      expect(row?.hashes).toEqual([sent[n]?.hash]);
      const receipt = (await rpc(anvil.http, "eth_getTransactionReceipt", [sent[n]?.hash])) as {
        effectiveGasPrice: Hex;
      };
      expect(BigInt(receipt.effectiveGasPrice)).toBeLessThanOrEqual(CEILING);
    }
  });
});

describe("replacements", () => {
  it("replaces a stuck transaction never above the ceiling, then holds it there", async () => {
    await setBaseFee(relayer, GWEI);
    await rpc(anvil.http, "evm_setAutomine", [false]);
    try {
      const purpose = `stuck:ceiling:${Date.now()}`;
      const heldBefore = await metric(relayer, (m) => m.relayerReplacementsHeld, { reason: "fee_ceiling" });
      await relayer.run(submit(CHAIN_ID, purpose));
      // Each pass replaces it while there is 10% of room under the ceiling; then it stays as it is.
      for (let pass = 0; pass < 8; pass++) await relayer.run(eagerTrack);
      const row = await rowOf(CHAIN_ID, purpose);
      expect(row?.held_reason).toBe("fee_ceiling");
      expect(row?.hashes.length).toBeGreaterThan(1);
      expect(BigInt(row?.max_fee_per_gas ?? "0")).toBeLessThanOrEqual(CEILING);
      expect(await metric(relayer, (m) => m.relayerReplacementsHeld, { reason: "fee_ceiling" })).toBe(
        heldBefore + 1,
      );
      await rpc(anvil.http, "evm_mine");
      await waitFor(() => trackedMined(relayer, CHAIN_ID, purpose), { timeoutMs: 10_000, what: "mined" });
      expect((await rowOf(CHAIN_ID, purpose))?.held_reason).toBeNull();
    } finally {
      await rpc(anvil.http, "evm_setAutomine", [true]);
    }
  });

  it("replaces a stuck transaction at most max_replacements times", async () => {
    const limited = runnerFor(testChain(CHAIN_ID, anvil.http, token, { max_replacements: 2 }));
    await setBaseFee(limited, GWEI);
    await rpc(anvil.http, "evm_setAutomine", [false]);
    try {
      const purpose = `stuck:limit:${Date.now()}`;
      await limited.run(submit(CHAIN_ID, purpose));
      for (let pass = 0; pass < 5; pass++) await limited.run(eagerTrack);
      const row = await rowOf(CHAIN_ID, purpose);
      expect(row?.hashes).toHaveLength(3);
      expect(row?.held_reason).toBe("replacement_limit");
      expect(await metric(limited, (m) => m.relayerReplacements)).toBe(2);
      expect(await metric(limited, (m) => m.relayerReplacementsHeld, { reason: "replacement_limit" })).toBe(
        1,
      );
      await rpc(anvil.http, "evm_mine");
      await waitFor(() => trackedMined(limited, CHAIN_ID, purpose), { timeoutMs: 10_000, what: "mined" });
    } finally {
      await rpc(anvil.http, "evm_setAutomine", [true]);
    }
  });

  it("replaces a stuck transaction only while its raised fees fit the hourly budget", async () => {
    await setBaseFee(relayer, GWEI);
    await rpc(anvil.http, "evm_setAutomine", [false]);
    const filler = -1;
    try {
      const purpose = `stuck:budget:${Date.now()}`;
      await relayer.run(submit(CHAIN_ID, purpose));
      const row = await rowOf(CHAIN_ID, purpose);
      const cost = BigInt(row?.gas_limit ?? "0") * BigInt(row?.max_fee_per_gas ?? "0");
      const [spent] = await query<{ wei: string }>(
        `SELECT coalesce(sum(wei), 0)::text AS wei FROM billing.relayer_spending
          WHERE chain_id = $1 AND minute >= date_trunc('minute', now() - interval '1 hour')`,
        [CHAIN_ID],
      );
      // What else the hour spent, up to less than a replacement's raise (12.5% of the cost) short of it.
      const rest = BUDGET - BigInt(spent?.wei ?? "0") - cost / 16n;
      await query(
        `INSERT INTO billing.relayer_spending (chain_id, from_address, minute, backend, wei)
          VALUES ($1, $2, date_trunc('minute', now()), $3, $4)`,
        [CHAIN_ID, RELAYER.toLowerCase(), filler, rest.toString()],
      );
      await relayer.run(eagerTrack);
      const held = await rowOf(CHAIN_ID, purpose);
      expect(held?.held_reason).toBe("budget");
      expect(held?.hashes).toHaveLength(1);
      expect(await metric(relayer, (m) => m.relayerReplacementsHeld, { reason: "budget" })).toBe(1);
      // The hour's other spending gone: the raise fits, and the replacement goes out.
      await query("DELETE FROM billing.relayer_spending WHERE chain_id = $1 AND backend = $2", [
        CHAIN_ID,
        filler,
      ]);
      await relayer.run(eagerTrack);
      const replaced = await rowOf(CHAIN_ID, purpose);
      expect(replaced?.hashes).toHaveLength(2);
      expect(replaced?.held_reason).toBeNull();
      await rpc(anvil.http, "evm_mine");
      await waitFor(() => trackedMined(relayer, CHAIN_ID, purpose), { timeoutMs: 10_000, what: "mined" });
    } finally {
      await query("DELETE FROM billing.relayer_spending WHERE chain_id = $1 AND backend = $2", [
        CHAIN_ID,
        filler,
      ]);
      await rpc(anvil.http, "evm_setAutomine", [true]);
    }
  });
});

describe("the relayer's balance", () => {
  const setBalance = async (wei: bigint) => {
    await rpc(anvil.http, "anvil_setBalance", [RELAYER, toHex(wei)]);
    // What the watchdog does every few seconds.
    return relayer.run(Effect.flatMap(RelayerBalances, (balances) => balances.read(chain)));
  };
  const low = () => metric(relayer, (m) => m.relayerBalanceLow);
  const belowFloor = () => metric(relayer, (m) => m.relayerBalanceBelowFloor);

  it("alerts below the low threshold, refuses new transactions below the floor, and recovers", async () => {
    await setBaseFee(relayer, GWEI);
    try {
      expect(await setBalance(ETHER / 2n)).toBe(ETHER / 2n);
      expect([await low(), await belowFloor()]).toEqual([1, 0]);
      const alerted = `balance:low:${Date.now()}`;
      await relayer.run(submit(CHAIN_ID, alerted));
      await waitFor(() => trackedMined(relayer, CHAIN_ID, alerted), { timeoutMs: 10_000, what: "mined" });

      await setBalance(ETHER / 20n);
      expect([await low(), await belowFloor()]).toEqual([1, 1]);
      const refusalsBefore = await metric(relayer, (m) => m.relayerFloorRefusals);
      const refused = `balance:floor:${Date.now()}`;
      const error = (await relayer.run(Effect.flip(submit(CHAIN_ID, refused)))) as RelayerError;
      expect(error.reason).toBe("balance_below_floor");
      expect(await rowOf(CHAIN_ID, refused)).toBeUndefined();
      expect(await metric(relayer, (m) => m.relayerFloorRefusals)).toBe(refusalsBefore + 1);
    } finally {
      await setBalance(10_000n * ETHER);
    }
    expect([await low(), await belowFloor()]).toEqual([0, 0]);
    const after = `balance:topped-up:${Date.now()}`;
    await relayer.run(submit(CHAIN_ID, after));
    await waitFor(() => trackedMined(relayer, CHAIN_ID, after), { timeoutMs: 10_000, what: "mined" });
  });
});

describe("the API below the relayer's balance floor", () => {
  it("answers 503 relayer_balance_low on the routes that send, and records nothing", async () => {
    // A second service process on the stack whose config puts 31337's floor above any balance.
    const dir = mkdtempSync(join(tmpdir(), "floor-"));
    try {
      const config = JSON.parse(readFileSync(stack().chainsFile, "utf8")) as {
        chains: Array<{ id: number; gas?: Record<string, string> }>;
      };
      const local = config.chains.find((c) => c.id === 31337);
      if (!local) throw new Error("no chain 31337");
      local.gas = { min_balance_wei: (10n ** 30n).toString() };
      const file = join(dir, "chains.json");
      writeFileSync(file, JSON.stringify(config, null, 2));
      const floored = await startSecondService({
        CHAINS_CONFIG: file,
        RELAYER_PRIVATE_KEY: stack().relayerKey,
      });
      const m = await merchantOnTestChain();
      const at = (baseUrl: string | undefined, path: string, body: unknown) =>
        api(path, { key: m.key, body, ...(baseUrl ? { baseUrl } : {}) });
      const created = await at(undefined, "/v1/mandates", {
        cap_decimal: "25",
        period: "month",
        customer: "cus_floor",
        reference: "floor",
      });
      expect(created.status, created.text).toBe(200);
      const id = (created.json as { id: string }).id;
      // Test funding sends a transaction: refused below the floor.
      const fund = await at(floored, `/v1/test/mandates/${id}/fund`, { amount_decimal: "40" });
      expect(fund.status, fund.text).toBe(503);
      expect(expectErrorShape(fund.json)).toMatchObject({ type: "api_error", code: "relayer_balance_low" });
      // Through the stack's own service (no floor) the same mandate is funded, signed and charged; the
      // floored one refuses the charge and records none.
      expect((await at(undefined, `/v1/test/mandates/${id}/fund`, { amount_decimal: "40" })).status).toBe(
        200,
      );
      expect((await at(undefined, `/v1/test/mandates/${id}/authorize`, {})).status).toBe(200);
      await m.waitForEvents("mandate.authorized", 1, (object) => object.id === id);
      const charge = await at(floored, `/v1/mandates/${id}/charges`, { amount_decimal: "10" });
      expect(charge.status, charge.text).toBe(503);
      expect(expectErrorShape(charge.json).code).toBe("relayer_balance_low");
      const listed = await api(`/v1/mandates/${id}/charges`, { key: m.key });
      expect((listed.json as { data: unknown[] }).data).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("behind a node that refuses eth_createAccessList and reports L1 fees", () => {
  let proxied: RunningAnvil;
  let proxy: OpNodeProxy;
  let proxiedToken: Hex;
  let runner: Runner;

  beforeAll(async () => {
    proxied = await startAnvil({ port: await freePort(), chainId: PROXIED_CHAIN_ID });
    proxiedToken = await deployTestUsdc(proxied);
    proxy = await startOpNodeProxy(proxied.http, L1_FEE);
    runner = runnerFor(testChain(PROXIED_CHAIN_ID, proxy.url, proxiedToken, undefined));
  });
  afterAll(async () => {
    await proxy?.close();
    await proxied?.stop();
  });

  const submitProxied = (purpose: string, data: Hex = mint) =>
    Effect.flatMap(Effect.service(Relayer), (r) =>
      r.submit(PROXIED_CHAIN_ID, { to: proxiedToken, data, purpose }),
    );

  it("measures gas limits with eth_estimateGas, asking for access lists once only", async () => {
    const first = `estimate:${Date.now()}:1`;
    const second = `estimate:${Date.now()}:2`;
    await runner.run(submitProxied(first));
    await runner.run(submitProxied(second));
    for (const purpose of [first, second])
      await waitFor(() => trackedMined(runner, PROXIED_CHAIN_ID, purpose), {
        timeoutMs: 10_000,
        what: "mined",
      });
    expect(proxy.asked.get("eth_createAccessList")).toBe(1);
    expect(proxy.asked.get("eth_estimateGas")).toBeGreaterThanOrEqual(2);
    // A call that would revert still costs nothing: refused before anything is recorded.
    const charge = encodeFunctionData({
      abi: MandateEscrowAbi,
      functionName: "charge",
      args: [`0x${"11".repeat(32)}`, 1n],
    });
    const reverting = `estimate:revert:${Date.now()}`;
    const error = (await runner.run(Effect.flip(submitProxied(reverting, charge)))) as RelayerError;
    expect(error.reason).toBe("simulation_failed");
    expect(await rowOf(PROXIED_CHAIN_ID, reverting)).toBeUndefined();
    expect(proxy.asked.get("eth_createAccessList")).toBe(1);
  });

  it("records the L1 data fee in what the transaction cost", async () => {
    const purpose = `l1fee:${Date.now()}`;
    const tx = await runner.run(submitProxied(purpose));
    await waitFor(() => trackedMined(runner, PROXIED_CHAIN_ID, purpose), {
      timeoutMs: 10_000,
      what: "mined",
    });
    const receipt = (await rpc(proxied.http, "eth_getTransactionReceipt", [tx.hash])) as {
      gasUsed: Hex;
      effectiveGasPrice: Hex;
    };
    const row = await rowOf(PROXIED_CHAIN_ID, purpose);
    expect(row?.l1_fee_wei).toBe(L1_FEE.toString());
    expect(row?.spent_wei).toBe(
      (BigInt(receipt.gasUsed) * BigInt(receipt.effectiveGasPrice) + L1_FEE).toString(),
    );
  });
});
