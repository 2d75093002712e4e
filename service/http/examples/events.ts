/** Examples of the event routes. */
import type { EventObject } from "../../events/events.ts";
import { charge } from "./mandates.ts";
import { at, IDS } from "./shared.ts";

export const event: EventObject = {
  id: IDS.event,
  object: "event",
  type: "charge.succeeded",
  created: at(3700),
  livemode: false,
  data: { object: charge },
};
