/**
 * A transaction's cost split over the objects it carried: integer shares that sum exactly to the total,
 * the remainder of the division one unit each to the first objects (callers order them by id, so the
 * split is deterministic). Pure.
 */
export const splitCost = (total: bigint, count: number): ReadonlyArray<bigint> => {
  if (count < 1 || !Number.isInteger(count)) return [total];
  const n = BigInt(count);
  const base = total / n;
  const remainder = Number(total % n);
  return Array.from({ length: count }, (_, i) => (i < remainder ? base + 1n : base));
};
