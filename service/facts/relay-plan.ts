/**
 * The order in which the relay applies a batch of facts. Pure. Facts apply in chain order; consecutive
 * `charge.succeeded` facts of one merchant (a batch charge's logs) form a run applied together with a
 * few statements, and any other fact ends the run before it.
 */
import type { FactRow } from "./fact-row.ts";

export type RelayStep<F extends Pick<FactRow, "kind">> =
  | { readonly kind: "charges"; readonly merchantId: string; readonly facts: readonly F[] }
  | { readonly kind: "one"; readonly merchantId: string; readonly fact: F };

export const planSteps = <F extends Pick<FactRow, "kind">>(
  owned: ReadonlyArray<{ readonly fact: F; readonly merchantId: string }>,
): RelayStep<F>[] => {
  const steps: RelayStep<F>[] = [];
  for (const { fact, merchantId } of owned) {
    const last = steps[steps.length - 1];
    if (fact.kind === "charge.succeeded") {
      if (last?.kind === "charges" && last.merchantId === merchantId)
        steps[steps.length - 1] = { ...last, facts: [...last.facts, fact] };
      else steps.push({ kind: "charges", merchantId, facts: [fact] });
    } else steps.push({ kind: "one", merchantId, fact });
  }
  return steps;
};
