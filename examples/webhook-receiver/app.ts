/**
 * A webhook receiver that follows the specification's handler contract:
 * 1. verify the signature first, over the raw bytes as received (before any JSON parsing);
 * 2. record the event id in a store with a uniqueness guarantee; an id already recorded is answered 200
 *    without redoing the work;
 * 3. answer 200 at once and do the work afterwards (a handler taking ~8 s would make retries pile up);
 * 4. answer 200 to event types it does not know (new types are added without a version change);
 * 5. never treat `webhook.test` as a payment: it goes to `onTest` only, even if a handler is registered
 *    under that name.
 *
 * Answers: 400 `{error: "malformed" | "expired" | "mismatch", message}` for a bad signature, 400
 * `{error: "invalid_json" | "not_an_event"}` for a signed body that is not an event, 500
 * `{error: "store_unavailable"}` when the id cannot be recorded (the sender retries), otherwise 200
 * `{received: true}` or `{received: true, duplicate: true}`.
 */
import { Hono } from "hono";
import { SIGNATURE_HEADER, verifySignature } from "../../service/webhooks/signature.ts";

export type EventStore = {
  /** true when the id was recorded by this call; false when it already was. Must be atomic. */
  recordOnce(eventId: string): Promise<boolean>;
};

export type ReceivedEvent = {
  readonly id: string;
  readonly object: "event";
  readonly type: string;
  readonly created: number;
  readonly livemode: boolean;
  readonly data: { readonly object: unknown };
};

export type EventHandler = (event: ReceivedEvent) => Promise<void>;

export type ReceiverOptions = {
  /** The endpoint's signing secret; both the new and the previous one during a rotation. */
  readonly secrets: readonly string[];
  readonly store: EventStore;
  /** The work per event type, run after the answer. Never called for `webhook.test`. */
  readonly handlers: Partial<Record<string, EventHandler>>;
  /** Called (after the answer) for `webhook.test`, the console's test button. */
  readonly onTest?: (event: ReceivedEvent) => void;
  /** Unix seconds; a fixed clock in tests. */
  readonly now?: () => number;
  /**
   * Failures once the signature is verified: recording the id (then answered 500), and a handler or
   * onTest failing after the answer. Default: console.error.
   */
  readonly onError?: (error: unknown, event: ReceivedEvent) => void;
};

export const TEST_EVENT_TYPE = "webhook.test";

const isEvent = (value: unknown): value is ReceivedEvent => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const { id, type } = value as { id?: unknown; type?: unknown };
  return typeof id === "string" && id !== "" && typeof type === "string" && type !== "";
};

const utf8 = new TextDecoder("utf-8", { fatal: true });

export const createReceiver = (options: ReceiverOptions): Hono => {
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const report = (error: unknown, event: ReceivedEvent) => {
    try {
      (options.onError ?? ((e) => console.error(`webhook ${event.id} (${event.type}) failed`, e)))(
        error,
        event,
      );
    } catch (failure) {
      console.error("webhook onError failed", failure);
    }
  };
  /** Runs `work` after the response is sent; a throw (sync or async) goes to onError, never to the process. */
  const later = (event: ReceivedEvent, work: () => unknown) =>
    setImmediate(() => {
      Promise.resolve()
        .then(work)
        .catch((error: unknown) => report(error, event));
    });

  const app = new Hono();
  app.post("/webhooks", async (c) => {
    // 1. Verify first, over the bytes exactly as received.
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
      event = JSON.parse(utf8.decode(body));
    } catch {
      return c.json({ error: "invalid_json", message: "The body is not JSON." }, 400);
    }
    if (!isEvent(event))
      return c.json({ error: "not_an_event", message: "The body has no string `id` and `type`." }, 400);

    // 2. Record the id; the store's uniqueness decides, so concurrent duplicates do the work once.
    let first: boolean;
    try {
      first = await options.store.recordOnce(event.id);
    } catch (error) {
      report(error, event);
      return c.json({ error: "store_unavailable", message: "Could not record the event; retry." }, 500);
    }
    if (!first) return c.json({ received: true, duplicate: true });

    // 3-5. Answer now; the work runs after the answer.
    const received = event;
    if (received.type === TEST_EVENT_TYPE) {
      const onTest = options.onTest;
      if (onTest) later(received, () => onTest(received));
    } else if (Object.hasOwn(options.handlers, received.type)) {
      const handler = options.handlers[received.type];
      if (handler) later(received, () => handler(received));
    }
    return c.json({ received: true });
  });
  return app;
};
