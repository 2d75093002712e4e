/** Runs `task` over `items` with at most `limit` in flight; the results in the items' order. */
export const inPool = async <T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<R>,
): Promise<R[]> => {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) out[i] = await task(items[i] as T, i);
    }),
  );
  return out;
};
