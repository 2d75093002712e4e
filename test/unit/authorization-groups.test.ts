import { Effect, Fiber, Queue } from "effect";
import { describe, expect, it } from "vitest";
import { takeGroup } from "../../service/chains/authorization-groups.ts";

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect);

describe("takeGroup", () => {
  it("takes at most `max`: the rest wait, in order, for the next groups", async () => {
    const groups = await run(
      Effect.gen(function* () {
        const queue = yield* Queue.unbounded<number>();
        yield* Queue.offerAll(
          queue,
          Array.from({ length: 120 }, (_, i) => i),
        );
        return [
          yield* takeGroup(queue, 50, "1 millis"),
          yield* takeGroup(queue, 50, "1 millis"),
          yield* takeGroup(queue, 50, "1 millis"),
        ];
      }),
    );
    expect(groups.map((group) => group.length)).toEqual([50, 50, 20]);
    expect(groups.flat()).toEqual(Array.from({ length: 120 }, (_, i) => i));
  });

  it("waits for a first item, then gathers what arrives within the window", async () => {
    const group = await run(
      Effect.gen(function* () {
        const queue = yield* Queue.unbounded<string>();
        const taking = yield* Effect.forkChild(takeGroup(queue, 50, "200 millis"));
        yield* Effect.sleep("50 millis");
        yield* Queue.offer(queue, "first");
        yield* Effect.sleep("50 millis");
        yield* Queue.offer(queue, "within the window");
        const taken = yield* Fiber.join(taking);
        yield* Queue.offer(queue, "after it");
        return { taken, left: yield* Queue.size(queue) };
      }),
    );
    expect(group).toEqual({ taken: ["first", "within the window"], left: 1 });
  });
});
