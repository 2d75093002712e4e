/**
 * The order in which the relay applies a batch of facts. Pure. Facts apply in chain order; consecutive
 * `charge.succeeded` facts of one merchant (a batch charge's logs) form a run applied together with a
 * few statements, and so do consecutive `mandate.authorized` facts of one merchant (an `authorizeMany`'s
 * logs) as long as each names another mandate (a run writes each mandate once). Any other fact ends the
 * run before it.
 */
import type { FactRow } from "./fact-row.ts";

export type RunKind = "charges" | "authorizations";

export type RelayStep<F extends Pick<FactRow, "kind" | "mandate_id">> =
  | { readonly kind: RunKind; readonly merchantId: string; readonly facts: readonly F[] }
  | { readonly kind: "one"; readonly merchantId: string; readonly fact: F };

const runOf = (kind: FactRow["kind"]): RunKind | undefined =>
  kind === "charge.succeeded" ? "charges" : kind === "mandate.authorized" ? "authorizations" : undefined;

export const planSteps = <F extends Pick<FactRow, "kind" | "mandate_id">>(
  owned: ReadonlyArray<{ readonly fact: F; readonly merchantId: string }>,
): RelayStep<F>[] => {
  const steps: RelayStep<F>[] = [];
  // The open run's facts (appended in place) and, for authorisations, the mandates it names.
  let run: { kind: RunKind; merchantId: string; facts: F[]; mandates: Set<string | null> } | undefined;
  for (const { fact, merchantId } of owned) {
    const kind = runOf(fact.kind);
    if (kind === undefined) {
      run = undefined;
      steps.push({ kind: "one", merchantId, fact });
      continue;
    }
    const joins =
      run !== undefined &&
      run.kind === kind &&
      run.merchantId === merchantId &&
      (kind === "charges" || !run.mandates.has(fact.mandate_id));
    if (run !== undefined && joins) {
      run.facts.push(fact);
      run.mandates.add(fact.mandate_id);
    } else {
      run = { kind, merchantId, facts: [fact], mandates: new Set([fact.mandate_id]) };
      steps.push({ kind, merchantId, facts: run.facts });
    }
  }
  return steps;
};
