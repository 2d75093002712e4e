import { describe, expect, it } from "vitest";
import { eventIdForFact } from "../../service/events/event-ids.ts";
import { eventPayload } from "../../service/events/outbox.ts";
import { ID_PATTERN } from "../../service/ids.ts";

const key = "31337:charge.succeeded:0xabc";

describe("events from facts", () => {
  it("derive the same id from the same fact, whoever relays it, sortable by chain time", () => {
    expect(eventIdForFact(key, 1_700_000_000)).toBe(eventIdForFact(key, 1_700_000_000));
    expect(eventIdForFact(key, 1_700_000_000)).toMatch(ID_PATTERN);
    expect(eventIdForFact("another", 1_700_000_000)).not.toBe(eventIdForFact(key, 1_700_000_000));
    expect(eventIdForFact("z", 1_700_000_000) < eventIdForFact("a", 1_700_000_001)).toBe(true);
  });

  it("carry the object in the documented envelope", () => {
    const object = { id: "ch_1", object: "charge" };
    expect(
      eventPayload({
        id: "evt_1",
        merchantId: "mer_1",
        livemode: false,
        type: "charge.succeeded",
        created: 1_700_000_000,
        object,
        key,
      }),
    ).toEqual({
      id: "evt_1",
      object: "event",
      type: "charge.succeeded",
      created: 1_700_000_000,
      livemode: false,
      data: { object },
    });
  });
});
