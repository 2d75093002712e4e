/**
 * A webhook receiver that follows the handler contract:
 * 1. verify the signature first, over the raw bytes;
 * 2. record the event id in a store with a uniqueness guarantee, and answer 200 without redoing the work
 *    for an id already recorded;
 * 3. answer 200 at once and do the work afterwards (a slow handler would make retries pile up);
 * 4. answer 200 to event types it does not know (new ones are added without a version change);
 * 5. never treat `webhook.test` as a payment.
 */
import { Hono } from "hono";
import { SIGNATURE_HEADER, verifySignature } from "../../service/webhooks/signature.ts";

export interface EventStore {
  /** true when the id was recorded now; false when it was already there. Must be atomic. */
  recordOnce(eventId: string): Promise<boolean>;
}

export interface ReceivedEvent {
  readonly id: string;
  readonly type: string;
  readonly created: number;
  readonly livemode: boolean;
  readonly data: { readonly object: unknown };
}

export interface ReceiverOptions {
  /** The endpoint's signing secret; two during a rotation. */
  readonly secrets: readonly string[];
  readonly store: EventStore;
  /** Work per payment event type, run after the answer. */
  readonly handlers: Partial<Record<string, (event: ReceivedEvent) => Promise<void>>>;
  readonly onTest?: (event: ReceivedEvent) => void;
  readonly onError?: (error: unknown, event: ReceivedEvent) => void;
  /** Unix seconds (a fixed clock in tests). */
  readonly now?: () => number;
}

const isEvent = (value: unknown): value is ReceivedEvent =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as { id?: unknown }).id === "string" &&
  typeof (value as { type?: unknown }).type === "string";

export const createReceiver = (options: ReceiverOptions) => {
  const app = new Hono();
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  app.post("/webhooks", async (c) => {
    const body = new Uint8Array(await c.req.arrayBuffer());
    const verified = verifySignature({
      header: c.req.header(SIGNATURE_HEADER),
      body,
      secrets: options.secrets,
      now: now(),
    });
    if (!verified.ok) return c.json({ error: verified.reason, message: verified.message }, 400);
    let event: unknown;
    try {
      event = JSON.parse(new TextDecoder().decode(body));
    } catch {
      return c.json({ error: "invalid_json" }, 400);
    }
    if (!isEvent(event)) return c.json({ error: "not_an_event" }, 400);
    if (!(await options.store.recordOnce(event.id))) return c.json({ received: true, duplicate: true });
    const received = event;
    setImmediate(() => {
      if (received.type === "webhook.test") {
        options.onTest?.(received);
        return;
      }
      const handler = options.handlers[received.type];
      handler?.(received).catch((error: unknown) => options.onError?.(error, received));
    });
    return c.json({ received: true });
  });
  return app;
};
