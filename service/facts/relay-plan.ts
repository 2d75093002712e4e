/**
 * The order in which the relay applies a batch of facts. Pure. Facts apply in chain order; consecutive
 * `charge.succeeded` facts of one merchant (a batch charge's logs) form a run applied together with a
 * few statements; so do consecutive `mandate.authorized` facts of one merchant (an `authorizeMany`'s
 * logs) as long as each names another mandate (a run writes each mandate once), and consecutive payment
 * facts of one merchant (a batch of sweeps or releases) as long as each names another deposit address (a
 * run steps each payment once). Any other fact ends the run before it.
 */
import type { FactRow } from "./fact-row.ts";

export type RunKind = "charges" | "authorizations" | "payments";

type Planned = Pick<FactRow, "kind" | "mandate_id" | "details">;

export type RelayStep<F extends Planned> =
  | { readonly kind: RunKind; readonly merchantId: string; readonly facts: readonly F[] }
  | { readonly kind: "one"; readonly merchantId: string; readonly fact: F };

const runOf = (kind: FactRow["kind"]): RunKind | undefined =>
  kind === "charge.succeeded"
    ? "charges"
    : kind === "mandate.authorized"
      ? "authorizations"
      : kind.startsWith("payment.")
        ? "payments"
        : undefined;

/** What a run may name only once: the mandate an authorisation writes, the payment a payment fact steps. */
const onceKey = (kind: RunKind, fact: Planned): string | undefined =>
  kind === "authorizations"
    ? (fact.mandate_id ?? "")
    : kind === "payments"
      ? String(fact.details.deposit_address ?? "").toLowerCase()
      : undefined;

export const planSteps = <F extends Planned>(
  owned: ReadonlyArray<{ readonly fact: F; readonly merchantId: string }>,
): RelayStep<F>[] => {
  const steps: RelayStep<F>[] = [];
  // The open run's facts (appended in place) and what it names that it may name only once.
  let run: { kind: RunKind; merchantId: string; facts: F[]; named: Set<string | undefined> } | undefined;
  for (const { fact, merchantId } of owned) {
    const kind = runOf(fact.kind);
    if (kind === undefined) {
      run = undefined;
      steps.push({ kind: "one", merchantId, fact });
      continue;
    }
    const once = onceKey(kind, fact);
    const joins =
      run !== undefined &&
      run.kind === kind &&
      run.merchantId === merchantId &&
      (once === undefined || !run.named.has(once));
    if (run !== undefined && joins) {
      run.facts.push(fact);
      run.named.add(once);
    } else {
      run = { kind, merchantId, facts: [fact], named: new Set([once]) };
      steps.push({ kind, merchantId, facts: run.facts });
    }
  }
  return steps;
};
