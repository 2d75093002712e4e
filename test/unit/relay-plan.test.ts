/**
 * The relay's batching: consecutive charge.succeeded facts of one merchant run together, and so do
 * consecutive mandate.authorized facts of one merchant naming distinct mandates and consecutive payment
 * facts of one merchant naming distinct deposit addresses, in chain order.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { FactRow } from "../../service/facts/fact-row.ts";
import { planSteps, type RunKind } from "../../service/facts/relay-plan.ts";

type Kind = FactRow["kind"];
const KINDS: readonly Kind[] = [
  "mandate.authorized",
  "mandate.revoked",
  "mandate.cap_lowered",
  "charge.succeeded",
  "charge.released",
  "charge.returned",
  "payment.received",
  "payment.released",
  "payment.returned",
];
const RUN_KIND: Partial<Record<Kind, RunKind>> = {
  "charge.succeeded": "charges",
  "mandate.authorized": "authorizations",
  "payment.received": "payments",
  "payment.released": "payments",
  "payment.returned": "payments",
};
/** What a run of this kind names once. */
const named = (
  kind: RunKind,
  fact: { mandate_id: string | null; details: Record<string, string | number> },
) =>
  kind === "authorizations"
    ? fact.mandate_id
    : kind === "payments"
      ? fact.details.deposit_address
      : undefined;

describe("planSteps", () => {
  it("keeps every fact once and in order, and runs only consecutive facts of one kind and merchant, an authorisations run naming each mandate once and a payments run each deposit address once (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            kind: fc.constantFrom(...KINDS),
            merchant: fc.constantFrom("m1", "m2"),
            mandate: fc.constantFrom("0xa", "0xb", "0xc"),
            deposit: fc.constantFrom("0xd1", "0xd2", "0xd3"),
          }),
        ),
        (facts) => {
          const owned = facts.map((f, i) => ({
            fact: { kind: f.kind, mandate_id: f.mandate, details: { deposit_address: f.deposit }, i },
            merchantId: f.merchant,
          }));
          const steps = planSteps(owned);
          const flattened = steps.flatMap((step) =>
            step.kind === "one"
              ? [{ f: step.fact, m: step.merchantId }]
              : step.facts.map((f) => ({ f, m: step.merchantId })),
          );
          expect(flattened.map((x) => x.f.i)).toEqual(owned.map((_, i) => i));
          expect(flattened.map((x) => x.m)).toEqual(owned.map((o) => o.merchantId));
          for (const step of steps)
            if (step.kind === "one") expect(RUN_KIND[step.fact.kind]).toBeUndefined();
            else {
              expect(step.facts.every((f) => RUN_KIND[f.kind] === step.kind)).toBe(true);
              if (step.kind !== "charges")
                expect(new Set(step.facts.map((f) => named(step.kind, f))).size).toBe(step.facts.length);
            }
          // Two neighbouring runs of one kind and merchant are split only by what the first names again.
          for (let i = 1; i < steps.length; i++) {
            const [a, b] = [steps[i - 1], steps[i]];
            if (a === undefined || b === undefined || a.kind === "one" || b.kind === "one") continue;
            if (a.kind !== b.kind || a.merchantId !== b.merchantId) continue;
            expect(a.kind).not.toBe("charges");
            const next = b.facts[0];
            if (next !== undefined)
              expect(a.facts.map((f) => named(a.kind, f))).toContain(named(b.kind, next));
          }
        },
      ),
    );
  });

  it("breaks a run at any other fact", () => {
    const f = (kind: Kind) => ({
      fact: { kind, mandate_id: "0xa", details: { deposit_address: "0xd" } },
      merchantId: "m",
    });
    const steps = planSteps([
      f("charge.succeeded"),
      f("charge.succeeded"),
      f("charge.released"),
      f("charge.succeeded"),
      f("mandate.authorized"),
    ]);
    expect(steps.map((s) => (s.kind === "one" ? "one" : `${s.kind}:${s.facts.length}`))).toEqual([
      "charges:2",
      "one",
      "charges:1",
      "authorizations:1",
    ]);
  });

  it("starts a new authorisations run when a mandate is authorised again", () => {
    const f = (mandate: string) => ({
      fact: { kind: "mandate.authorized" as const, mandate_id: mandate, details: {} },
      merchantId: "m",
    });
    const steps = planSteps([f("0xa"), f("0xb"), f("0xa"), f("0xc")]);
    expect(steps.map((s) => (s.kind === "one" ? [] : s.facts.map((x) => x.mandate_id)))).toEqual([
      ["0xa", "0xb"],
      ["0xa", "0xc"],
    ]);
  });

  it("runs a batch of sweeps and releases together, starting again at a deposit address named twice", () => {
    const f = (kind: Kind, deposit: string) => ({
      fact: { kind, mandate_id: null, details: { deposit_address: deposit } },
      merchantId: "m",
    });
    const steps = planSteps([
      f("payment.received", "0xD1"),
      f("payment.received", "0xd2"),
      f("payment.released", "0xd3"),
      f("payment.returned", "0xd1"),
      f("charge.released", "0xd4"),
      f("payment.received", "0xd4"),
    ]);
    expect(steps.map((s) => (s.kind === "one" ? "one" : `${s.kind}:${s.facts.length}`))).toEqual([
      "payments:3",
      "payments:1",
      "one",
      "payments:1",
    ]);
  });
});
