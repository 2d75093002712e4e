/** The relay's batching: consecutive charge.succeeded facts of one merchant run together, in chain order. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { FactRow } from "../../service/facts/fact-row.ts";
import { planSteps } from "../../service/facts/relay-plan.ts";

type Kind = FactRow["kind"];
const KINDS: readonly Kind[] = [
  "mandate.authorized",
  "mandate.revoked",
  "charge.succeeded",
  "charge.released",
  "charge.returned",
];

describe("planSteps", () => {
  it("keeps every fact once and in order, and runs only consecutive charge.succeeded of one merchant (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ kind: fc.constantFrom(...KINDS), merchant: fc.constantFrom("m1", "m2"), n: fc.nat() }),
        ),
        (facts) => {
          const owned = facts.map((f, i) => ({ fact: { kind: f.kind, i }, merchantId: f.merchant }));
          const steps = planSteps(owned);
          const flattened = steps.flatMap((step) =>
            step.kind === "charges"
              ? step.facts.map((f) => ({ f, m: step.merchantId }))
              : [{ f: step.fact, m: step.merchantId }],
          );
          expect(flattened.map((x) => x.f.i)).toEqual(owned.map((_, i) => i));
          expect(flattened.map((x) => x.m)).toEqual(owned.map((o) => o.merchantId));
          for (const step of steps)
            if (step.kind === "charges")
              expect(step.facts.every((f) => f.kind === "charge.succeeded")).toBe(true);
            else expect(step.fact.kind).not.toBe("charge.succeeded");
          // Two neighbouring runs are never of one merchant (they would have been one).
          for (let i = 1; i < steps.length; i++) {
            const [a, b] = [steps[i - 1], steps[i]];
            if (a?.kind === "charges" && b?.kind === "charges") expect(a.merchantId).not.toBe(b.merchantId);
          }
        },
      ),
    );
  });

  it("breaks a run at any other fact", () => {
    const f = (kind: Kind) => ({ fact: { kind }, merchantId: "m" });
    const steps = planSteps([
      f("charge.succeeded"),
      f("charge.succeeded"),
      f("charge.released"),
      f("charge.succeeded"),
    ]);
    expect(steps.map((s) => (s.kind === "charges" ? s.facts.length : "one"))).toEqual([2, "one", 1]);
  });
});
