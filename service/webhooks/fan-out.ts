/**
 * The webhooks' side of the outbox: each batch of new events gets its deliveries in the transaction
 * that wrote the events, so an event committed is an event that will be delivered, and an event rolled
 * back was never offered to anyone. Each (endpoint, event) pair gets one delivery from fan-out by
 * construction: only the events the outbox's insert returned are fanned out, and an event id is inserted
 * once, so no unique index checks it (migration 0028 dropped one that every delivery paid for). Replays
 * and test sends add deliveries of their own. No separate fan-out worker: nothing to lose between the two.
 */
import { Effect, Layer } from "effect";
import { EventFanOut } from "../events/outbox.ts";
import { DeliveryStore } from "./delivery-store.ts";

export const webhookFanOut = Layer.effect(
  EventFanOut,
  Effect.map(DeliveryStore, (store) => ({ deliver: store.fanOut })),
);
