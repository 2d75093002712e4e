/**
 * The relayer's hourly spending budget per chain, and its tracker after the chain lost blocks, on an
 * anvil of its own and the stack's database: the budget refuses a transaction that would spend beyond
 * it (and counts the refusal), and a transaction queued behind nonces the chain no longer has is mined
 * once the tracker fills the gap, instead of being re-sent forever.
 */
import { Effect } from "effect";
import { encodeFunctionData, type Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestUSDCAbi } from "../../abis/TestUSDC.ts";
import { type RunningAnvil, rpc, startAnvil } from "../../scripts/stack/anvil.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { Relayer, type RelayerError } from "../../service/chains/relayer.ts";
import { Metrics } from "../../service/metrics/metrics.ts";
import { deployTestUsdc } from "./chain-driver.ts";
import { query } from "./helpers.ts";
import { type RelayerServices, relayerRunner, relayerTestChain, track } from "./relayer-harness.ts";

const CHAIN_ID = 31342;
const BUDGET = 10n ** 15n;
let anvil: RunningAnvil;
let token: Hex;
let run: <A, E>(effect: Effect.Effect<A, E, RelayerServices>) => Promise<A>;
let dispose: (() => Promise<void>) | undefined;

beforeAll(async () => {
  anvil = await startAnvil({ port: await freePort(), chainId: CHAIN_ID });
  token = await deployTestUsdc(anvil);
  const chain = relayerTestChain(CHAIN_ID, "relayer budget test chain", anvil.http, token, {
    relayer_budget_wei_per_hour: BUDGET.toString(),
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
const submit = (purpose: string) =>
  Effect.flatMap(Effect.service(Relayer), (relayer) =>
    relayer.submit(CHAIN_ID, { to: token, data: mint, purpose }),
  );
const trackOnce = track("1 hour");
/** Budget refusals counted on the chain by this runtime's metrics. */
const refusals = () =>
  run(
    Effect.flatMap(Metrics, (metrics) =>
      Effect.promise(() => metrics.relayerBudgetRefusals.get()).pipe(
        Effect.map(
          (counter) => counter.values.find((v) => v.labels.chain_id === String(CHAIN_ID))?.value ?? 0,
        ),
      ),
    ),
  );
const find = (purpose: string) =>
  Effect.flatMap(Effect.service(Relayer), (relayer) => relayer.find(CHAIN_ID, purpose));
/** One tracking pass, then whether the purpose's transaction is recorded as mined. */
const trackedMined = async (purpose: string) => {
  await run(trackOnce);
  return (await run(find(purpose)))?.status === "mined";
};

describe("relayer budget", () => {
  it("refuses a transaction beyond the chain's hourly budget, and counts the refusal", async () => {
    const refusalsBefore = await refusals();
    const accepted: string[] = [];
    let refused: RelayerError | undefined;
    for (let i = 0; i < 50 && refused === undefined; i++) {
      const purpose = `budget:${Date.now()}:${i}`;
      const outcome = await run(Effect.result(submit(purpose)));
      if (outcome._tag === "Success") accepted.push(purpose);
      else refused = outcome.failure as RelayerError;
    }
    expect(refused?.reason).toBe("budget_exhausted");
    expect(accepted.length).toBeGreaterThan(0);
    expect(await refusals()).toBe(refusalsBefore + 1);
    // What the accepted ones may cost stays within the budget.
    const [reserved] = await query<{ wei: string }>(
      "SELECT sum(gas_limit * max_fee_per_gas)::text AS wei FROM billing.relayer_transactions WHERE chain_id = $1",
      [CHAIN_ID],
    );
    expect(BigInt(reserved?.wei ?? "0")).toBeLessThanOrEqual(BUDGET);
    // Once mined, each counts what it really paid (gas used × price), less than reserved.
    await run(trackOnce);
    const [spent] = await query<{ wei: string; unmined: string }>(
      `SELECT sum(spent_wei)::text AS wei, count(*) FILTER (WHERE spent_wei IS NULL)::text AS unmined
       FROM billing.relayer_transactions WHERE chain_id = $1`,
      [CHAIN_ID],
    );
    expect(spent?.unmined).toBe("0");
    expect(BigInt(spent?.wei ?? "0")).toBeLessThan(BigInt(reserved?.wei ?? "0"));
  });
});

describe("relayer tracker after the chain lost blocks", () => {
  it("fills the nonce gap so that a queued transaction is mined", async () => {
    // A fresh hour of budget for this chain: the previous test spent it.
    await query(
      "UPDATE billing.relayer_transactions SET created_at = now() - interval '2 hours' WHERE chain_id = $1",
      [CHAIN_ID],
    );
    await query(
      "UPDATE billing.relayer_spending SET minute = minute - interval '2 hours' WHERE chain_id = $1",
      [CHAIN_ID],
    );
    const snapshot = (await rpc(anvil.http, "evm_snapshot", [])) as string;
    const lost = await run(submit(`gap:lost:${Date.now()}`));
    await waitFor(() => trackedMined(lost.purpose), {
      timeoutMs: 10_000,
      what: "the first transaction mined and recorded",
    });
    // The chain goes back to before it: our record says mined, the chain has never seen that nonce.
    await rpc(anvil.http, "evm_revert", [snapshot]);
    const queued = await run(submit(`gap:queued:${Date.now()}`));
    expect(queued.nonce).toBe(lost.nonce + 1);
    await run(trackOnce); // fills nonce `lost.nonce`; anvil then mines the queued one
    await waitFor(() => trackedMined(queued.purpose), {
      timeoutMs: 10_000,
      what: "the queued transaction mined",
    });
  });
});
