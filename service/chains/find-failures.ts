/**
 * Finding which items of an all-or-nothing batch fail, with as few simulations as possible. Pure but for
 * the simulations it is given, so it is tested with fakes.
 */
import { Effect } from "effect";

/**
 * Each item's failure (undefined: it would succeed), simulating the batch whole first and splitting it
 * in halves while a part would fail, until the failing items stand alone. Costs one simulation for a
 * batch that succeeds, and about 2·k·log₂(n) for k failures among n.
 */
export const findFailures = <T, F, E, R>(
  batch: ReadonlyArray<T>,
  whole: (items: ReadonlyArray<T>) => Effect.Effect<boolean, E, R>,
  one: (item: T) => Effect.Effect<F | undefined, E, R>,
): Effect.Effect<ReadonlyArray<F | undefined>, E, R> => {
  const [only] = batch;
  if (only === undefined) return Effect.succeed([]);
  if (batch.length === 1) return Effect.map(one(only), (failure) => [failure]);
  return Effect.flatMap(whole(batch), (ok) => {
    if (ok) return Effect.succeed(batch.map(() => undefined));
    const half = Math.ceil(batch.length / 2);
    return Effect.map(
      Effect.all([
        findFailures(batch.slice(0, half), whole, one),
        findFailures(batch.slice(half), whole, one),
      ]),
      ([a, b]) => [...a, ...b],
    );
  });
};
