/**
 * The relay's batching: consecutive charge.succeeded facts of one merchant run together, and so do
 * consecutive mandate.authorized facts of one merchant naming distinct mandates, in chain order.
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
];
const RUN_KIND: Partial<Record<Kind, RunKind>> = {
  "charge.succeeded": "charges",
  "mandate.authorized": "authorizations",
};

describe("planSteps", () => {
  it("keeps every fact once and in order, and runs only consecutive facts of one kind and merchant, an authorisations run naming each mandate once (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            kind: fc.constantFrom(...KINDS),
            merchant: fc.constantFrom("m1", "m2"),
            mandate: fc.constantFrom("0xa", "0xb", "0xc"),
          }),
        ),
        (facts) => {
          const owned = facts.map((f, i) => ({
            fact: { kind: f.kind, mandate_id: f.mandate, i },
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
              if (step.kind === "authorizations")
                expect(new Set(step.facts.map((f) => f.mandate_id)).size).toBe(step.facts.length);
            }
          // Two neighbouring runs of one kind and merchant are split only by a repeated mandate.
          for (let i = 1; i < steps.length; i++) {
            const [a, b] = [steps[i - 1], steps[i]];
            if (a === undefined || b === undefined || a.kind === "one" || b.kind === "one") continue;
            if (a.kind !== b.kind || a.merchantId !== b.merchantId) continue;
            expect(a.kind).toBe("authorizations");
            expect(a.facts.map((f) => f.mandate_id)).toContain(b.facts[0]?.mandate_id);
          }
        },
      ),
    );
  });

  it("breaks a run at any other fact", () => {
    const f = (kind: Kind) => ({ fact: { kind, mandate_id: "0xa" }, merchantId: "m" });
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
      fact: { kind: "mandate.authorized" as const, mandate_id: mandate },
      merchantId: "m",
    });
    const steps = planSteps([f("0xa"), f("0xb"), f("0xa"), f("0xc")]);
    expect(steps.map((s) => (s.kind === "one" ? [] : s.facts.map((x) => x.mandate_id)))).toEqual([
      ["0xa", "0xb"],
      ["0xa", "0xc"],
    ]);
  });
});
