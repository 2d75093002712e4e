/**
 * The dunning schedule of an invoice whose charge failed. The escrow charges the period the chain is in,
 * so an invoice can only be collected during its own period: retries fall 1, 3, 5 and 7 days after the
 * first failure (all inside the shortest month), and none is scheduled at or after the period's end.
 * When no retry is left, the invoice becomes `uncollectible` and the subscription `canceled`.
 */

const DAY = 86_400;

/** Days after the first failed attempt. */
export const RETRY_DAYS = [1, 3, 5, 7] as const;

/** The chain time of the next retry after `failures` failed attempts, or undefined when none is left. */
export const nextRetryAt = (input: {
  readonly firstFailureAt: number;
  readonly failures: number;
  readonly periodEnd: number;
}): number | undefined => {
  const days = RETRY_DAYS[input.failures - 1];
  if (days === undefined) return undefined;
  const at = input.firstFailureAt + days * DAY;
  return at < input.periodEnd ? at : undefined;
};
