import { Result } from "effect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyLog, applyLogs } from "../../src/ledger/ledger.ts";
import { periodIndexAt } from "../../src/ledger/period.ts";
import {
  chargeKey,
  type EscrowLog,
  emptyLedger,
  type LedgerState,
  type LogPosition,
  type MandateLog,
  mandateKey,
} from "../../src/ledger/types.ts";

const RUNS = Number(process.env.LEDGER_RUNS ?? 300);
const hex = (n: number | bigint, bytes: number) => `0x${n.toString(16).padStart(bytes * 2, "0")}`;
const CUSTOMER = hex(0xc0, 20);
const PAYEE = hex(0xb0, 20);
const TOKEN = hex(0x70, 20);
const OPERATOR = hex(0x0b, 20);
const START = 1_700_000_000;

/** Intentions; the generator turns them into logs, mostly valid, sometimes corrupted. */
type Step =
  | { op: "authorize"; mandate: number; cap: number; periods: number; hold: number }
  | { op: "revoke"; mandate: number }
  | { op: "lower"; mandate: number; percent: number }
  | { op: "charge"; mandate: number; percent: number }
  | { op: "end"; pick: number; release: boolean }
  | { op: "wait"; seconds: number }
  | {
      op: "corrupt";
      mandate: number;
      how: "above_cap" | "twice" | "wrong_left" | "unknown" | "raise" | "left_uncapped";
    };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    op: fc.constant("authorize" as const),
    mandate: fc.nat(2),
    cap: fc.integer({ min: 1, max: 1000 }),
    periods: fc.integer({ min: 1, max: 3 }),
    hold: fc.constantFrom(0, 0, 3600),
  }),
  fc.record({ op: fc.constant("revoke" as const), mandate: fc.nat(2) }),
  fc.record({
    op: fc.constant("lower" as const),
    mandate: fc.nat(2),
    percent: fc.integer({ min: 1, max: 99 }),
  }),
  fc.record({
    op: fc.constant("charge" as const),
    mandate: fc.nat(2),
    percent: fc.integer({ min: 1, max: 100 }),
  }),
  fc.record({
    op: fc.constant("charge" as const),
    mandate: fc.nat(2),
    percent: fc.integer({ min: 1, max: 100 }),
  }),
  fc.record({ op: fc.constant("end" as const), pick: fc.nat(), release: fc.boolean() }),
  fc.record({ op: fc.constant("wait" as const), seconds: fc.integer({ min: 1, max: 40 * 86_400 }) }),
  fc.record({
    op: fc.constant("corrupt" as const),
    mandate: fc.nat(2),
    how: fc.constantFrom(
      "above_cap" as const,
      "twice" as const,
      "wrong_left" as const,
      "unknown" as const,
      "raise" as const,
      "left_uncapped" as const,
    ),
  }),
);

interface Sim {
  now: number;
  block: number;
  mandates: Map<
    number,
    {
      cap: bigint;
      periods: number;
      left: bigint;
      nonce: bigint;
      hold: number;
      last: number;
      revoked: boolean;
    }
  >;
  held: Array<{ mandate: number; chargeId: string; period: number; amount: bigint; releaseAt: number }>;
}

const mandateId = (m: number) => `${CUSTOMER}${hex(m + 1, 12).slice(2)}`;

/** Turns steps into a log sequence the way the contract would emit it (plus deliberate corruptions). */
const toLogs = (steps: readonly Step[]): MandateLog[] => {
  const sim: Sim = { now: START, block: 1, mandates: new Map(), held: [] };
  const logs: MandateLog[] = [];
  /** Corrupted logs take a block but no time, so they shift nothing for the valid logs around them. */
  const at = (advance = true): LogPosition => {
    sim.block += 1;
    if (advance) sim.now += 12;
    return {
      chainId: 31337,
      blockNumber: sim.block,
      blockHash: hex(sim.block, 32),
      timestamp: sim.now,
      txHash: hex(sim.block * 7 + 1, 32),
      logIndex: 0,
    };
  };
  for (const s of steps) {
    if (s.op === "wait") {
      sim.now += s.seconds;
      continue;
    }
    if (s.op === "end") {
      const h = sim.held[s.pick % Math.max(1, sim.held.length)];
      if (!h) continue;
      if (s.release ? sim.now + 12 < h.releaseAt : sim.now + 12 >= h.releaseAt) continue;
      sim.held = sim.held.filter((x) => x !== h);
      const base = {
        at: at(),
        mandateId: mandateId(h.mandate),
        chargeId: h.chargeId,
        period: h.period,
        amount: h.amount,
      };
      logs.push(
        s.release
          ? { kind: "Released", ...base, payee: PAYEE }
          : { kind: "Returned", ...base, customer: CUSTOMER },
      );
      continue;
    }
    const m = sim.mandates.get(s.mandate);
    if (s.op === "authorize") {
      if (m?.revoked) continue;
      const nonce = (m?.nonce ?? 0n) + 1n;
      const cap = BigInt(s.cap);
      sim.mandates.set(s.mandate, {
        cap,
        periods: s.periods,
        left: cap * BigInt(s.periods),
        nonce,
        hold: m ? m.hold : s.hold,
        last: m?.last ?? -1,
        revoked: false,
      });
      logs.push({
        kind: "MandateAuthorized",
        at: at(),
        mandateId: mandateId(s.mandate),
        customer: CUSTOMER,
        payee: PAYEE,
        token: TOKEN,
        cap,
        anchor: START,
        approvalPeriods: s.periods,
        operator: OPERATOR,
        holdSeconds: m ? m.hold : s.hold,
        nonce,
        approval: cap * BigInt(s.periods),
      });
      continue;
    }
    if (s.op === "revoke") {
      if (!m || m.revoked) continue;
      m.revoked = true;
      logs.push({ kind: "MandateRevoked", at: at(), mandateId: mandateId(s.mandate), customer: CUSTOMER });
      continue;
    }
    const lowered = (cap: bigint, left: bigint, advance = true): MandateLog => ({
      kind: "CapLowered",
      at: at(advance),
      mandateId: mandateId(s.mandate),
      previousCap: m?.cap ?? 0n,
      cap,
      approvalLeft: left,
      by: OPERATOR,
    });
    if (s.op === "lower") {
      if (!m || m.revoked) continue;
      const cap = (m.cap * BigInt(s.percent)) / 100n;
      if (cap === 0n) continue;
      const limit = cap * BigInt(m.periods);
      const log = lowered(cap, m.left < limit ? m.left : limit);
      m.cap = cap;
      m.left = m.left < limit ? m.left : limit;
      logs.push(log);
      continue;
    }
    if (s.op === "corrupt" && (s.how === "raise" || s.how === "left_uncapped")) {
      if (!m || m.revoked) continue;
      if (s.how === "raise") logs.push(lowered(m.cap + 1n, m.left, false));
      else if (m.cap > 1n && m.left > (m.cap - 1n) * BigInt(m.periods))
        logs.push(lowered(m.cap - 1n, m.left, false));
      continue;
    }
    const position = at(s.op !== "corrupt");
    const period = periodIndexAt(START, position.timestamp) ?? 0;
    const charged = (amount: bigint, left: bigint, p = period, id = mandateId(s.mandate)): MandateLog => ({
      kind: "Charged",
      at: position,
      mandateId: id,
      chargeId: hex(BigInt(s.mandate) * 1000n + BigInt(p), 32),
      period: p,
      amount,
      customer: CUSTOMER,
      payee: PAYEE,
      token: TOKEN,
      releaseAt: m && m.hold > 0 ? position.timestamp + m.hold : 0,
      approvalLeft: left,
    });
    if (s.op === "corrupt") {
      if (s.how === "unknown") logs.push(charged(1n, 0n, period, mandateId(9)));
      else if (m && s.how === "above_cap") logs.push(charged(m.cap + 1n, m.left - m.cap - 1n));
      else if (m && s.how === "twice" && m.last >= 0) logs.push(charged(1n, m.left - 1n, m.last));
      else if (m && s.how === "wrong_left" && m.left > 0n) logs.push(charged(1n, m.left));
      continue;
    }
    if (!m || m.revoked || m.last >= period) continue;
    const amount = (m.cap * BigInt(s.percent) + 99n) / 100n;
    if (amount > m.left) continue;
    m.left -= amount;
    m.last = period;
    const log = charged(amount, m.left);
    if (log.kind === "Charged" && log.releaseAt > 0)
      sim.held.push({ mandate: s.mandate, chargeId: log.chargeId, period, amount, releaseAt: log.releaseAt });
    logs.push(log);
  }
  return logs;
};

/** Applies logs, skipping (and counting) those the ledger refuses, as a defensive consumer would. */
const foldSkipping = (logs: readonly MandateLog[], from: LedgerState = emptyLedger) => {
  let state = from;
  let refused = 0;
  for (const log of logs) {
    const applied = applyLog(state, log);
    if (Result.isFailure(applied)) refused += 1;
    else state = applied.success.state;
  }
  return { state, refused };
};

const serialise = (state: LedgerState) =>
  JSON.stringify(
    {
      mandates: [...state.mandates.entries()].sort(([a], [b]) => (a < b ? -1 : 1)),
      charges: [...state.charges.entries()].sort(([a], [b]) => (a < b ? -1 : 1)),
    },
    (_, v) => (typeof v === "bigint" ? `${v}n` : v),
  );

const logsArb = fc.array(step, { maxLength: 60 }).map(toLogs);

describe("ledger", () => {
  it("never lets a period exceed the cap in force, nor a signature its approval", () => {
    fc.assert(
      fc.property(logsArb, (logs) => {
        let state = emptyLedger;
        const chargedPeriods = new Set<string>();
        const spentSinceSignature = new Map<string, bigint>();
        const signedApproval = new Map<string, bigint>();
        for (const log of logs) {
          const applied = applyLog(state, log);
          if (Result.isFailure(applied)) continue;
          const before = state.mandates.get(mandateKey(31337, log.mandateId));
          state = applied.success.state;
          if (log.kind === "MandateAuthorized") {
            spentSinceSignature.set(log.mandateId, 0n);
            signedApproval.set(log.mandateId, log.approval);
          }
          const after = state.mandates.get(mandateKey(31337, log.mandateId));
          // A lowering only narrows what the customer signed.
          if (log.kind === "CapLowered") expect(after && before && after.cap < before.cap).toBe(true);
          if (log.kind !== "Charged") continue;
          if (!before) throw new Error("charge accepted without a mandate");
          expect(log.amount).toBeLessThanOrEqual(before.cap);
          const key = `${log.mandateId}:${log.period}`;
          expect(chargedPeriods.has(key), "two charges in one period").toBe(false);
          chargedPeriods.add(key);
          const spent = (spentSinceSignature.get(log.mandateId) ?? 0n) + log.amount;
          spentSinceSignature.set(log.mandateId, spent);
          expect(spent).toBeLessThanOrEqual(signedApproval.get(log.mandateId) ?? 0n);
        }
        for (const mandate of state.mandates.values()) {
          expect(mandate.approvalLeft).toBeGreaterThanOrEqual(0n);
          expect(mandate.approvalLeft).toBeLessThanOrEqual(mandate.cap * BigInt(mandate.approvalPeriods));
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("refuses every corrupted log and accepts every valid one", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const logs = toLogs(steps);
        const valid = toLogs(steps.filter((s) => s.op !== "corrupt"));
        const { refused } = foldSkipping(logs);
        expect(refused).toBe(logs.length - valid.length);
        expect(Result.isSuccess(applyLogs(emptyLedger, valid))).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });

  it("matches a straightforward model of approvals, periods and holds", () => {
    fc.assert(
      fc.property(logsArb, (logs) => {
        const { state } = foldSkipping(logs);
        // The model: the contract's rules, written out plainly, applied log by log.
        const mandates = new Map<
          string,
          {
            cap: bigint;
            periods: number;
            left: bigint;
            last: number;
            revoked: boolean;
            hold: number;
            nonce: bigint;
          }
        >();
        const charges = new Map<string, { status: string; amount: bigint; releaseAt: number }>();
        for (const log of logs) {
          const m = mandates.get(log.mandateId);
          if (log.kind === "MandateAuthorized") {
            if (m?.revoked || (m && log.nonce <= m.nonce)) continue;
            mandates.set(log.mandateId, {
              cap: log.cap,
              periods: log.approvalPeriods,
              left: log.approval,
              last: m?.last ?? -1,
              revoked: false,
              hold: log.holdSeconds,
              nonce: log.nonce,
            });
          } else if (log.kind === "MandateRevoked") {
            if (m && !m.revoked) m.revoked = true;
          } else if (log.kind === "CapLowered") {
            if (!m || m.revoked || log.previousCap !== m.cap || log.cap === 0n || log.cap >= m.cap) continue;
            const limit = log.cap * BigInt(m.periods);
            if (log.approvalLeft !== (m.left < limit ? m.left : limit)) continue;
            m.cap = log.cap;
            m.left = log.approvalLeft;
          } else if (log.kind === "Charged") {
            const ok =
              m &&
              !m.revoked &&
              log.amount > 0n &&
              log.amount <= m.cap &&
              log.amount <= m.left &&
              log.period > m.last &&
              log.period === periodIndexAt(START, log.at.timestamp) &&
              log.approvalLeft === m.left - log.amount;
            if (!ok || !m) continue;
            m.left -= log.amount;
            m.last = log.period;
            charges.set(log.chargeId, {
              status: log.releaseAt === 0 ? "settled" : "held",
              amount: log.amount,
              releaseAt: log.releaseAt,
            });
          } else {
            const c = charges.get(log.chargeId);
            if (c?.status !== "held" || c.amount !== log.amount) continue;
            if (log.kind === "Released" ? log.at.timestamp < c.releaseAt : log.at.timestamp >= c.releaseAt)
              continue;
            c.status = log.kind === "Released" ? "released" : "returned";
          }
        }
        expect(state.mandates.size).toBe(mandates.size);
        for (const [id, m] of mandates) {
          const actual = state.mandates.get(mandateKey(31337, id));
          expect([actual?.approvalLeft, actual?.lastChargedPeriod, actual?.status, actual?.cap]).toEqual([
            m.left,
            m.last,
            m.revoked ? "revoked" : "active",
            m.cap,
          ]);
        }
        expect(state.charges.size).toBe(charges.size);
        for (const [id, c] of charges) expect(state.charges.get(chargeKey(31337, id))?.status).toBe(c.status);
      }),
      { numRuns: RUNS },
    );
  });

  it("gives byte-identical state and facts for the same logs", () => {
    fc.assert(
      fc.property(logsArb, (logs) => {
        const valid = logs.filter((_, i) => Result.isSuccess(applyLogs(emptyLedger, logs.slice(0, i + 1))));
        const a = applyLogs(emptyLedger, valid);
        const b = applyLogs(emptyLedger, valid);
        if (Result.isFailure(a) || Result.isFailure(b)) throw new Error("valid logs refused");
        expect(serialise(a.success.state)).toBe(serialise(b.success.state));
        expect(JSON.stringify(a.success.facts, (_, v) => (typeof v === "bigint" ? `${v}n` : v))).toBe(
          JSON.stringify(b.success.facts, (_, v) => (typeof v === "bigint" ? `${v}n` : v)),
        );
        expect(new Set(a.success.facts.map((f) => f.key)).size).toBe(a.success.facts.length);
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  it("after a reorg (drop a suffix, apply another branch) equals the final branch applied alone", () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 40 }),
        fc.array(step, { maxLength: 20 }),
        fc.array(step, { maxLength: 20 }),
        (prefix, a, b) => {
          const prefixLogs = toLogs(prefix);
          const withA = toLogs([...prefix, ...a]);
          const withB = toLogs([...prefix, ...b]);
          const base = foldSkipping(prefixLogs);
          const before = serialise(base.state);
          foldSkipping(withA.slice(prefixLogs.length), base.state); // the branch that gets dropped
          expect(serialise(base.state), "applying a branch must not change the state it started from").toBe(
            before,
          );
          const reorged = foldSkipping(withB.slice(prefixLogs.length), base.state);
          expect(serialise(reorged.state)).toBe(serialise(foldSkipping(withB).state));
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe("ledger: cap changes", () => {
  const position = (block: number): LogPosition => ({
    chainId: 31337,
    blockNumber: block,
    blockHash: hex(block, 32),
    timestamp: START + block * 12,
    txHash: hex(block, 32),
    logIndex: 0,
  });
  const id = mandateId(0);
  const authorized = (block: number, cap: bigint, nonce: bigint): MandateLog => ({
    kind: "MandateAuthorized",
    at: position(block),
    mandateId: id,
    customer: CUSTOMER,
    payee: PAYEE,
    token: TOKEN,
    cap,
    anchor: START,
    approvalPeriods: 3,
    operator: OPERATOR,
    holdSeconds: 0,
    nonce,
    approval: cap * 3n,
  });
  const lowered = (block: number, previousCap: bigint, cap: bigint, approvalLeft: bigint, by = OPERATOR) =>
    ({ kind: "CapLowered", at: position(block), mandateId: id, previousCap, cap, approvalLeft, by }) as const;
  const signed = applyLogs(emptyLedger, [authorized(1, 50n, 1n)]);

  it("lowers the cap, caps the approval left, and reports it once per (nonce, cap)", () => {
    const folded = applyLogs(emptyLedger, [
      authorized(1, 50n, 1n),
      lowered(2, 50n, 20n, 60n),
      lowered(3, 20n, 15n, 45n, PAYEE),
      authorized(4, 80n, 2n),
    ]);
    if (Result.isFailure(folded)) throw folded.failure;
    expect(folded.success.facts.map((f) => [f.kind, f.key, f.details.previous_cap, f.details.cap])).toEqual([
      ["mandate.authorized", `31337:mandate.authorized:${id}:1`, undefined, "50"],
      ["mandate.cap_lowered", `31337:mandate.cap_lowered:${id}:1:20`, "50", "20"],
      ["mandate.cap_lowered", `31337:mandate.cap_lowered:${id}:1:15`, "20", "15"],
      ["mandate.authorized", `31337:mandate.authorized:${id}:2`, "15", "80"],
    ]);
    expect(folded.success.state.mandates.get(mandateKey(31337, id))).toMatchObject({
      cap: 80n,
      approvalLeft: 240n,
      nonce: 2n,
    });
  });

  it("refuses a lowering that raises, keeps the cap, leaves too much approved, comes from anyone else, or follows a revocation", () => {
    if (Result.isFailure(signed)) throw signed.failure;
    const base = signed.success.state;
    const refused = (log: MandateLog, from: LedgerState = base) => Result.isFailure(applyLog(from, log));
    expect(refused(lowered(2, 50n, 60n, 150n))).toBe(true);
    expect(refused(lowered(2, 50n, 50n, 150n))).toBe(true);
    expect(refused(lowered(2, 50n, 0n, 0n))).toBe(true);
    expect(refused(lowered(2, 40n, 20n, 60n))).toBe(true);
    expect(refused(lowered(2, 50n, 20n, 150n))).toBe(true);
    expect(refused(lowered(2, 50n, 20n, 60n, CUSTOMER))).toBe(true);
    expect(refused(lowered(2, 50n, 20n, 60n), emptyLedger)).toBe(true);
    const revoked = applyLog(base, {
      kind: "MandateRevoked",
      at: position(2),
      mandateId: id,
      customer: CUSTOMER,
    });
    if (Result.isFailure(revoked)) throw revoked.failure;
    expect(refused(lowered(3, 50n, 20n, 60n), revoked.success.state)).toBe(true);
    expect(refused(lowered(2, 50n, 20n, 60n))).toBe(false);
  });

  it("takes a lowering by a relayer the operator named, and refuses it from one removed or named by another operator", () => {
    if (Result.isFailure(signed)) throw signed.failure;
    const RELAYER = "0x5000000000000000000000000000000000000005";
    const relayerSet = (block: number, operator: string, allowed: boolean) =>
      ({ kind: "RelayerSet", at: position(block), operator, relayer: RELAYER, allowed }) as const;
    const fold = (logs: EscrowLog[]) => applyLogs(signed.success.state, logs);
    const named = fold([relayerSet(2, OPERATOR, true), lowered(3, 50n, 20n, 60n, RELAYER)]);
    if (Result.isFailure(named)) throw named.failure;
    expect(named.success.facts.map((f) => [f.kind, f.details.by])).toEqual([
      ["mandate.cap_lowered", RELAYER],
    ]);
    expect(Result.isFailure(fold([lowered(2, 50n, 20n, 60n, RELAYER)]))).toBe(true);
    expect(
      Result.isFailure(
        fold([
          relayerSet(2, OPERATOR, true),
          relayerSet(3, OPERATOR, false),
          lowered(4, 50n, 20n, 60n, RELAYER),
        ]),
      ),
    ).toBe(true);
    expect(Result.isFailure(fold([relayerSet(2, PAYEE, true), lowered(3, 50n, 20n, 60n, RELAYER)]))).toBe(
      true,
    );
  });
});
