/**
 * Each merchant's share of the relayer's hourly budget (chains/relayer-shares.ts), on an anvil of its own
 * and the stack's database, with a budget small enough to reach: a merchant's transactions are refused
 * once their parts would pass its share (counted, with the time it has room again), another merchant's
 * still go out, a batch serving both is refused naming only the first, and the merchants' parts follow
 * each transaction's cost through its receipt. Then the API's answer, through a service process whose
 * config leaves a merchant almost no share: 503 `relayer_share_exhausted` with `Retry-After`, nothing
 * recorded.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Effect } from "effect";
import { encodeFunctionData, type Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestUSDCAbi } from "../../abis/TestUSDC.ts";
import { type RunningAnvil, startAnvil } from "../../scripts/stack/anvil.ts";
import { freePort } from "../../scripts/stack/wait.ts";
import { Relayer, type RelayerError } from "../../service/chains/relayer.ts";
import { unavailable } from "../../service/chains/unavailable.ts";
import { toErrorResponse } from "../../service/http/error-response.ts";
import { Metrics } from "../../service/metrics/metrics.ts";
import { deployTestUsdc } from "./chain-driver.ts";
import { api, expectErrorShape, merchantOnTestChain, query, stack } from "./helpers.ts";
import { type RelayerServices, relayerRunner, relayerTestChain, track } from "./relayer-harness.ts";
import { startSecondService } from "./second-service.ts";

const CHAIN_ID = 31345;
const BUDGET = 10n ** 15n;
const SHARE = BUDGET / 2n;
const A = `mer_share_a_${Date.now()}`;
const B = `mer_share_b_${Date.now()}`;
let anvil: RunningAnvil;
let token: Hex;
let run: <A, E>(effect: Effect.Effect<A, E, RelayerServices>) => Promise<A>;
let dispose: (() => Promise<void>) | undefined;

beforeAll(async () => {
  anvil = await startAnvil({ port: await freePort(), chainId: CHAIN_ID });
  token = await deployTestUsdc(anvil);
  const chain = relayerTestChain(CHAIN_ID, "merchant shares test chain", anvil.http, token, {
    relayer_budget_wei_per_hour: BUDGET.toString(),
    relayer_merchant_share: 0.5,
  });
  const runner = relayerRunner(chain);
  dispose = runner.dispose;
  run = runner.run;
});
afterAll(async () => {
  await dispose?.();
  await anvil?.stop();
});

const mint = encodeFunctionData({
  abi: TestUSDCAbi,
  functionName: "mint",
  args: ["0x000000000000000000000000000000000000dEaD", 1n],
});
let sequence = 0;
/** A transaction carrying one object of each merchant named (a merchant named twice: two objects). */
const submit = (merchants: readonly string[]) =>
  run(
    Effect.result(
      Effect.flatMap(Effect.service(Relayer), (relayer) =>
        relayer.submit(CHAIN_ID, {
          to: token,
          data: mint,
          purpose: `share:${Date.now()}:${sequence++}`,
          merchants,
        }),
      ),
    ),
  );
const refusals = () =>
  run(
    Effect.flatMap(Metrics, (metrics) =>
      Effect.promise(() => metrics.relayerShareRefusals.get()).pipe(
        Effect.map(
          (counter) => counter.values.find((v) => v.labels.chain_id === String(CHAIN_ID))?.value ?? 0,
        ),
      ),
    ),
  );
/** A merchant's part of the chain's spending, as the totals keep it. */
const totalOf = async (merchant: string) =>
  BigInt(
    (
      await query<{ wei: string }>(
        "SELECT coalesce(sum(wei), 0)::text AS wei FROM billing.relayer_merchant_spending WHERE chain_id = $1 AND merchant_id = $2",
        [CHAIN_ID, merchant],
      )
    )[0]?.wei ?? "0",
  );
/** The same computed from the transactions: each one's cost now, times the merchant's objects over all. */
const partsOf = async (merchant: string) =>
  BigInt(
    (
      await query<{ wei: string }>(
        `SELECT coalesce(sum(div(coalesce(t.spent_wei, CASE WHEN t.status = 'superseded' THEN 0
            ELSE t.gas_limit * t.max_fee_per_gas END) * m.objects,
            (SELECT sum(k) FROM unnest(t.merchant_objects) AS o(k)))), 0)::text AS wei
          FROM billing.relayer_transactions t, unnest(t.merchant_ids, t.merchant_objects) AS m(merchant_id, objects)
          WHERE t.chain_id = $1 AND m.merchant_id = $2`,
        [CHAIN_ID, merchant],
      )
    )[0]?.wei ?? "0",
  );

describe("each merchant's share of the relayer's hourly budget", () => {
  it("refuses a merchant past its share, not another merchant; a batch serving both names only the first", async () => {
    const refusalsBefore = await refusals();
    let accepted = 0;
    let refused: RelayerError | undefined;
    for (let i = 0; i < 50 && refused === undefined; i++) {
      const outcome = await submit([A]);
      if (outcome._tag === "Success") accepted++;
      else refused = outcome.failure as RelayerError;
    }
    expect(accepted).toBeGreaterThan(0);
    expect(refused?.reason).toBe("merchant_share_exhausted");
    expect(refused?.merchants).toEqual([A]);
    // Room comes back as the hour lets go of the merchant's spending: within an hour and a minute.
    expect(refused?.retryAfterSeconds).toBeGreaterThan(60 * 58);
    expect(refused?.retryAfterSeconds).toBeLessThanOrEqual(61 * 60);
    expect(await refusals()).toBe(refusalsBefore + 1);
    // What A's transactions may cost stays within its share; the totals equal the transactions' parts.
    const reserved = await totalOf(A);
    expect(reserved).toBeLessThanOrEqual(SHARE);
    expect(reserved).toBe(await partsOf(A));
    // The API answers 503 with Retry-After, in the one error shape.
    const answer = toErrorResponse(unavailable(refused as RelayerError));
    expect(answer.status).toBe(503);
    expect(answer.body.error.code).toBe("relayer_share_exhausted");
    expect(Number(answer.headers?.["Retry-After"])).toBe(refused?.retryAfterSeconds);

    // Another merchant is not held back by A's spending.
    expect((await submit([B]))._tag).toBe("Success");
    // Batches of 19 objects of A's and one of B's: each counts 19/20 of its cost against A, until one
    // would pass A's share and is refused for A alone; without A's objects it goes out.
    let mixed: RelayerError | undefined;
    for (let i = 0; i < 20 && mixed === undefined; i++) {
      const outcome = await submit([...Array.from({ length: 19 }, () => A), B]);
      if (outcome._tag === "Failure") mixed = outcome.failure as RelayerError;
    }
    expect(mixed?.reason).toBe("merchant_share_exhausted");
    expect(mixed?.merchants).toEqual([A]);
    expect((await submit([B, B]))._tag).toBe("Success");
    expect(await totalOf(A)).toBeLessThanOrEqual(SHARE);
    // Batch senders skip A's objects until then; B's go on.
    const skipped = await run(Effect.flatMap(Effect.service(Relayer), (r) => r.skippedMerchants(CHAIN_ID)));
    expect(skipped).toContain(A);
    expect(skipped).not.toContain(B);

    // Once mined, each part is of what the transaction paid, and the totals still equal the parts.
    const reservedAll = await totalOf(A);
    await run(track("1 hour"));
    const [unmined] = await query<{ n: number }>(
      "SELECT count(*)::int AS n FROM billing.relayer_transactions WHERE chain_id = $1 AND spent_wei IS NULL",
      [CHAIN_ID],
    );
    expect(unmined?.n).toBe(0);
    for (const merchant of [A, B]) expect(await totalOf(merchant)).toBe(await partsOf(merchant));
    expect(await totalOf(A)).toBeLessThan(reservedAll);
    console.log(
      `merchant shares: ${JSON.stringify({ budget_wei: BUDGET.toString(), share_wei: SHARE.toString(), a_transactions: accepted, a_paid_wei: (await totalOf(A)).toString(), b_paid_wei: (await totalOf(B)).toString() })}`,
    );
  });
});

describe("the API past a merchant's share", () => {
  it("answers 503 relayer_share_exhausted with Retry-After on a route that sends, and records nothing", async () => {
    // A second service process on the stack whose config gives each merchant a millionth of 31337's
    // budget (10^12 wei: less than any transaction costs there).
    const dir = mkdtempSync(join(tmpdir(), "share-"));
    try {
      const config = JSON.parse(readFileSync(stack().chainsFile, "utf8")) as {
        chains: Array<{ id: number; relayer_merchant_share?: number }>;
      };
      const local = config.chains.find((c) => c.id === 31337);
      if (!local) throw new Error("no chain 31337");
      local.relayer_merchant_share = 0.000001;
      const file = join(dir, "chains.json");
      writeFileSync(file, JSON.stringify(config, null, 2));
      const narrow = await startSecondService({
        CHAINS_CONFIG: file,
        RELAYER_PRIVATE_KEY: stack().relayerKey,
      });
      const m = await merchantOnTestChain();
      const created = await m.call("/v1/mandates", {
        cap_decimal: "25",
        period: "month",
        customer: "cus_share",
      });
      expect(created.status, created.text).toBe(200);
      const id = (created.json as { id: string }).id;
      // Through the stack's own service (half the budget each) the mandate is funded and signed.
      expect((await m.call(`/v1/test/mandates/${id}/fund`, { amount_decimal: "40" })).status).toBe(200);
      expect((await m.call(`/v1/test/mandates/${id}/authorize`, {})).status).toBe(200);
      await m.waitForEvents("mandate.authorized", 1, (object) => object.id === id);
      const charge = await api(`/v1/mandates/${id}/charges`, {
        key: m.key,
        body: { amount_decimal: "10" },
        baseUrl: narrow,
      });
      expect(charge.status, charge.text).toBe(503);
      expect(expectErrorShape(charge.json)).toMatchObject({
        type: "api_error",
        code: "relayer_share_exhausted",
      });
      expect(Number(charge.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(((await m.call(`/v1/mandates/${id}/charges`)).json as { data: unknown[] }).data).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
