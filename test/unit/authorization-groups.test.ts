import { describe, expect, it } from "@effect/vitest";
import { Effect, Fiber, Queue } from "effect";
import { TestClock } from "effect/testing";
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

  it.effect("waits for a first item, then gathers what arrives within the window (TestClock)", () =>
    Effect.gen(function* () {
      const queue = yield* Queue.unbounded<string>();
      const taking = yield* Effect.forkChild(takeGroup(queue, 50, "200 millis"));
      yield* TestClock.adjust("50 millis");
      expect(taking.pollUnsafe()).toBeUndefined();
      yield* Queue.offer(queue, "first");
      yield* TestClock.adjust("150 millis");
      yield* Queue.offer(queue, "within the window");
      expect(taking.pollUnsafe()).toBeUndefined();
      yield* TestClock.adjust("50 millis");
      const taken = yield* Fiber.join(taking);
      yield* Queue.offer(queue, "after it");
      expect({ taken, left: yield* Queue.size(queue) }).toEqual({
        taken: ["first", "within the window"],
        left: 1,
      });
    }),
  );
});
