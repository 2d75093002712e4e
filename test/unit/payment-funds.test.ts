import { Result } from "effect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyLog } from "../../src/ledger/ledger.ts";
import { emptyLedger, type LedgerState, type LogPosition, type PaymentLog } from "../../src/ledger/types.ts";

const RUNS = Number(process.env.LEDGER_RUNS ?? 300);
const hex = (n: number | bigint, bytes: number) => `0x${n.toString(16).padStart(bytes * 2, "0")}`;
const PAYEE = hex(0xb0, 20);
const TOKEN = hex(0x70, 20);
const HOLD = 3600;

type Step =
  | { op: "sweep"; deposit: number; amount: number }
  | { op: "end"; deposit: number; release: boolean }
  | { op: "wait"; seconds: number }
  | {
      op: "corrupt";
      deposit: number;
      how: "wrong_held" | "early_release" | "late_return" | "empty" | "foreign";
    };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    op: fc.constant("sweep" as const),
    deposit: fc.nat(2),
    amount: fc.integer({ min: 1, max: 500 }),
  }),
  fc.record({ op: fc.constant("end" as const), deposit: fc.nat(2), release: fc.boolean() }),
  fc.record({ op: fc.constant("wait" as const), seconds: fc.integer({ min: 1, max: 2 * HOLD }) }),
  fc.record({
    op: fc.constant("corrupt" as const),
    deposit: fc.nat(2),
    how: fc.constantFrom(
      "wrong_held" as const,
      "early_release" as const,
      "late_return" as const,
      "empty" as const,
      "foreign" as const,
    ),
  }),
);

const depositOf = (d: number) => hex(0xd0 + d, 20);
const paymentOf = (d: number) => hex(0x9000 + d, 32);
/** Deposit 0 has no hold; the others hold for HOLD seconds. */
const holds = (d: number) => d !== 0;

/** Steps into logs the way the escrow emits them, plus deliberate corruptions; counts the corrupt ones. */
const toLogs = (steps: readonly Step[]) => {
  let now = 1_700_000_000;
  let block = 1;
  const held = new Map<number, { amount: bigint; releaseAt: number }>();
  const swept = new Set<number>();
  const logs: PaymentLog[] = [];
  let corrupt = 0;
  const at = (): LogPosition => ({
    chainId: 31337,
    blockNumber: ++block,
    blockHash: hex(block, 32),
    timestamp: now,
    txHash: hex(block, 32),
    logIndex: 0,
  });
  const base = (d: number) => ({
    paymentId: paymentOf(d),
    payee: PAYEE,
    depositAddress: depositOf(d),
    token: TOKEN,
  });
  for (const s of steps) {
    if (s.op === "wait") now += s.seconds;
    else if (s.op === "sweep") {
      now += 12;
      const open = held.get(s.deposit);
      const h = open?.amount ?? 0n;
      const amount = BigInt(s.amount);
      const releaseAt = holds(s.deposit) ? (open && h > 0n ? open.releaseAt : now + HOLD) : 0;
      const total = holds(s.deposit) ? h + amount : 0n;
      if (holds(s.deposit)) held.set(s.deposit, { amount: total, releaseAt });
      swept.add(s.deposit);
      logs.push({ kind: "PaymentReceived", at: at(), ...base(s.deposit), amount, releaseAt, held: total });
    } else if (s.op === "end") {
      now += 12;
      const h = held.get(s.deposit);
      if (!h || h.amount === 0n) continue;
      const release = now >= h.releaseAt;
      held.delete(s.deposit);
      logs.push(
        release
          ? { kind: "PaymentReleased", at: at(), ...base(s.deposit), amount: h.amount }
          : { kind: "PaymentReturned", at: at(), ...base(s.deposit), amount: h.amount, to: hex(0xc0, 20) },
      );
    } else {
      const h = held.get(s.deposit);
      const position = { ...at(), timestamp: now };
      switch (s.how) {
        case "empty":
          logs.push({
            kind: "PaymentReceived",
            at: position,
            ...base(s.deposit),
            amount: 0n,
            releaseAt: 0,
            held: 0n,
          });
          break;
        case "wrong_held":
          logs.push({
            kind: "PaymentReceived",
            at: position,
            ...base(1),
            amount: 5n,
            releaseAt: held.get(1)?.releaseAt ?? now + HOLD,
            held: (held.get(1)?.amount ?? 0n) + 6n,
          });
          break;
        case "early_release":
          if (!h || now >= h.releaseAt) continue;
          logs.push({ kind: "PaymentReleased", at: position, ...base(s.deposit), amount: h.amount });
          break;
        case "late_return":
          if (!h || now < h.releaseAt) continue;
          logs.push({
            kind: "PaymentReturned",
            at: position,
            ...base(s.deposit),
            amount: h.amount,
            to: PAYEE,
          });
          break;
        case "foreign":
          // Another payment's terms on a deposit address already swept (a first sweep would be valid).
          if (!swept.has(s.deposit)) continue;
          logs.push({
            kind: "PaymentReceived",
            at: position,
            ...base(s.deposit),
            paymentId: hex(0xbad, 32),
            amount: 1n,
            releaseAt: 0,
            held: 0n,
          });
          break;
      }
      const last = logs[logs.length - 1];
      if (last?.at === position) corrupt++;
    }
  }
  return { logs, corrupt };
};

describe("payment funds in the ledger", () => {
  it("refuses corrupted logs, and otherwise matches the escrow: received only grows, holds end once", () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 50 }), (steps) => {
        const { logs } = toLogs(steps);
        let state: LedgerState = emptyLedger;
        const keys = new Set<string>();
        const model = new Map<
          string,
          { received: bigint; held: bigint; released: bigint; returned: bigint }
        >();
        for (const log of logs) {
          const applied = applyLog(state, log);
          const m = model.get(log.depositAddress) ?? { received: 0n, held: 0n, released: 0n, returned: 0n };
          if (Result.isFailure(applied)) continue;
          state = applied.success.state;
          for (const fact of applied.success.facts) {
            expect(keys.has(fact.key), "a fact key twice").toBe(false);
            keys.add(fact.key);
            expect(fact.paymentId).toBe(log.paymentId);
            expect(fact.payee).toBe(PAYEE);
          }
          if (log.kind === "PaymentReceived") {
            m.received += log.amount;
            m.held = log.held;
          } else if (log.kind === "PaymentReleased") {
            m.released += m.held;
            m.held = 0n;
          } else {
            m.returned += m.held;
            m.held = 0n;
          }
          model.set(log.depositAddress, m);
        }
        for (const [address, m] of model) {
          const funds = state.payments.get(`31337:${address}`);
          expect(funds).toMatchObject(m);
          expect((funds?.released ?? 0n) + (funds?.returned ?? 0n) + (funds?.held ?? 0n)).toBeLessThanOrEqual(
            funds?.received ?? 0n,
          );
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("accepts every log the escrow would emit, and refuses each corrupted one", () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 50 }), (steps) => {
        const valid = toLogs(steps.filter((s) => s.op !== "corrupt")).logs;
        let state: LedgerState = emptyLedger;
        for (const log of valid) {
          const applied = applyLog(state, log);
          expect(Result.isSuccess(applied), `${log.kind} refused`).toBe(true);
          if (Result.isSuccess(applied)) state = applied.success.state;
        }
        const { logs, corrupt } = toLogs(steps);
        let refused = 0;
        state = emptyLedger;
        for (const log of logs) {
          const applied = applyLog(state, log);
          if (Result.isFailure(applied)) refused++;
          else state = applied.success.state;
        }
        expect(refused).toBe(corrupt);
      }),
      { numRuns: RUNS },
    );
  });
});
