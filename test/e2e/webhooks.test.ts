/**
 * Webhook endpoints and delivery on the real stack: registration rules (event names, SSRF in live
 * mode, the secret shown once), signed delivery of real chain events, failures recorded with their
 * attempts, redirects not followed, a hung endpoint not delaying another, replay, rotation overlap,
 * disable and delete, and the deliveries listing.
 */
import { afterAll, describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { EVENT_TYPES } from "../../service/events/event-types.ts";
import { verifySignature } from "../../service/webhooks/signature.ts";
import { api, expectErrorShape, newAddress, newMerchantWithKey, query } from "./helpers.ts";
import { type Answer, type Received, startReceiver } from "./receiver.ts";
import { deliveriesSettled, relaySettled } from "./settle.ts";

const receivers: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  for (const receiver of receivers) await receiver.close();
});

const receiver = async (answer?: (request: Received, index: number) => Answer) => {
  const started = await startReceiver(answer);
  receivers.push(started);
  return started;
};

const merchant = async (mode: "test" | "live" = "test") => {
  const { key, merchantId } = await newMerchantWithKey(mode);
  const call = (path: string, body?: unknown, method?: string) =>
    api(path, { key, ...(body === undefined ? {} : { body }), ...(method ? { method } : {}) });
  const endpoint = async (url: string, events: string[] = ["mandate.authorized"]) => {
    const created = await call("/v1/webhook_endpoints", { url, events });
    expect(created.status, created.text).toBe(200);
    return created.json as { id: string; secret: string; url: string; events: string[] };
  };
  const deliveries = async (endpointId: string, params = "") =>
    (await call(`/v1/webhook_endpoints/${endpointId}/deliveries?limit=100${params}`)).json.data as Array<{
      id: string;
      event: string;
      status: string;
      trigger: string;
      attempt_count: number;
      next_attempt: number | null;
      attempts: Array<{
        number: number;
        status_code: number | null;
        error: string | null;
        response_body: string | null;
        duration_ms: number;
      }>;
    }>;
  return { key, merchantId, call, endpoint, deliveries };
};

const endpointCount = async (merchantId: string) =>
  Number(
    (
      await query<{ n: string }>(
        "SELECT count(*)::text AS n FROM billing.webhook_endpoints WHERE merchant_id = $1",
        [merchantId],
      )
    )[0]?.n,
  );

const waitUntil = (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000) =>
  waitFor(async () => check(), { timeoutMs, intervalMs: 50, what });

const now = () => Math.floor(Date.now() / 1000);

describe("webhook endpoints", () => {
  it("lists every emitted event type, the spec's names included", async () => {
    const m = await merchant();
    const response = await m.call("/v1/event_types");
    expect(response.status).toBe(200);
    const types = (response.json.data as Array<{ type: string; description: string }>).map((t) => t.type);
    expect(types).toEqual([...EVENT_TYPES]);
    for (const name of [
      "mandate.authorized",
      "charge.succeeded",
      "charge.released",
      "charge.returned",
      "mandate.insufficient",
      "mandate.requires_authorization",
      "invoice.paid",
      "discount.ending_above_cap",
      "usage.limit_exceeded",
      "schedule.upcoming_charge_at_risk",
      "payment.paid",
      "payment.reversed",
      "payment.underpaid",
      "webhook.test",
    ])
      expect(types).toContain(name);
  });

  it("returns the signing secret once, never again, and stores it encrypted", async () => {
    const m = await merchant();
    const created = await m.endpoint("http://127.0.0.1:9/hooks", ["charge.succeeded", "charge.released"]);
    expect(created).toMatchObject({
      object: "webhook_endpoint",
      url: "http://127.0.0.1:9/hooks",
      events: ["charge.succeeded", "charge.released"],
      status: "enabled",
      livemode: false,
      previous_secret_expires: null,
    });
    expect(created.id).toMatch(/^we_[0-9A-Z]{26}$/);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    for (const read of [
      await m.call(`/v1/webhook_endpoints/${created.id}`),
      await m.call("/v1/webhook_endpoints"),
    ]) {
      expect(read.status).toBe(200);
      expect(read.text).not.toContain(created.secret);
      expect(read.text).not.toContain('"secret"');
    }
    const [row] = await query<{ sealed: Buffer }>(
      "SELECT secret_ciphertext AS sealed FROM billing.webhook_endpoints WHERE id = $1",
      [created.id],
    );
    expect(Buffer.from(row?.sealed ?? []).toString("latin1")).not.toContain(created.secret.slice(6));
  });

  it("refuses unknown or misspelt event names with a 400 that lists them, creating nothing", async () => {
    const m = await merchant();
    const response = await m.call("/v1/webhook_endpoints", {
      url: "http://127.0.0.1:9/hooks",
      events: ["charge.succeeded", "charge.succeded", "invoice.payed", "charge.succeded"],
    });
    expect(response.status).toBe(400);
    const error = expectErrorShape(response.json);
    expect(error).toMatchObject({
      type: "invalid_request_error",
      code: "event_type_unknown",
      param: "events",
    });
    expect(error.message).toContain('"charge.succeded"');
    expect(error.message).toContain('"invoice.payed"');
    expect(error.message).not.toContain('"charge.succeeded"');
    for (const events of [[], ["*"], [""], "charge.succeeded", [1]]) {
      const bad = await m.call("/v1/webhook_endpoints", { url: "http://127.0.0.1:9/x", events });
      expect(bad.status, JSON.stringify(events)).toBe(400);
      expectErrorShape(bad.json);
    }
    expect(await endpointCount(m.merchantId)).toBe(0);
  });

  it("refuses localhost and private addresses in live mode, however spelt (and http), creating nothing", async () => {
    const m = await merchant("live");
    const forms = [
      "https://localhost/h",
      "https://LOCALHOST./h",
      "https://api.localhost/h",
      "https://127.0.0.1/h",
      "https://127.1/h",
      "https://2130706433/h",
      "https://0x7f000001/h",
      "https://0177.0.0.1/h",
      "https://0x7f.0.0.1/h",
      "https://0.0.0.0/h",
      "https://0/h",
      "https://10.1.2.3/h",
      "https://172.16.0.1/h",
      "https://192.168.1.1/h",
      "https://100.64.0.1/h",
      "https://169.254.169.254/latest/meta-data",
      "https://metadata.google.internal/computeMetadata/v1",
      "https://[::1]/h",
      "https://[::]/h",
      "https://[::ffff:127.0.0.1]/h",
      "https://[::ffff:a00:1]/h",
      "https://[fd00:ec2::254]/h",
      "https://[fc00::1]/h",
      "https://[fe80::1]/h",
      "https://[64:ff9b::7f00:1]/h",
      "https://[2002:7f00:1::]/h",
    ];
    expect(forms.length).toBeGreaterThanOrEqual(25);
    for (const url of forms) {
      const response = await m.call("/v1/webhook_endpoints", { url, events: ["charge.succeeded"] });
      expect(response.status, url).toBe(400);
      expect(expectErrorShape(response.json), url).toMatchObject({ code: "url_private", param: "url" });
    }
    const insecure = await m.call("/v1/webhook_endpoints", {
      url: "http://hooks.example.com/h",
      events: ["charge.succeeded"],
    });
    expect(expectErrorShape(insecure.json)).toMatchObject({ code: "url_insecure", param: "url" });
    for (const url of ["ftp://example.com/x", "/relative", "https://user:pw@example.com/x", "not a url"]) {
      const response = await m.call("/v1/webhook_endpoints", { url, events: ["charge.succeeded"] });
      expect(expectErrorShape(response.json), url).toMatchObject({ code: "url_invalid", param: "url" });
    }
    expect(await endpointCount(m.merchantId)).toBe(0);
    // A public address is accepted in live mode (never dialled in this test).
    const ok = await m.call("/v1/webhook_endpoints", {
      url: "https://93.184.215.14/hooks",
      events: ["charge.succeeded"],
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json.livemode).toBe(true);
  });

  it("refuses cloud metadata, link-local and special addresses in test mode too, where private ones are allowed", async () => {
    const m = await merchant("test");
    for (const url of [
      "http://169.254.169.254/latest/meta-data",
      "http://0xa9fea9fe/",
      "http://169.254.10.1/h",
      "http://100.100.100.200/",
      "http://metadata.google.internal/computeMetadata/v1",
      "http://metadata/computeMetadata/v1",
      "http://[fd00:ec2::254]/",
      "http://[fe80::1]/h",
      "http://[::ffff:127.0.0.1]/h",
      "http://0.0.0.0/h",
      "http://224.0.0.1/h",
      "http://240.0.0.1/h",
    ]) {
      const response = await m.call("/v1/webhook_endpoints", { url, events: ["charge.succeeded"] });
      expect(response.status, url).toBe(400);
      expect(expectErrorShape(response.json), url).toMatchObject({ code: "url_private", param: "url" });
    }
    expect(await endpointCount(m.merchantId)).toBe(0);
    for (const url of [
      "http://127.0.0.1:9/h",
      "http://localhost:9/h",
      "http://10.1.2.3/h",
      "http://[fd12::1]/h",
    ]) {
      const response = await m.call("/v1/webhook_endpoints", { url, events: ["charge.succeeded"] });
      expect(response.status, `${url}: ${response.text}`).toBe(200);
    }
  });
});

describe("webhook delivery", () => {
  it("delivers subscribed chain events once per endpoint, signed over the exact bytes", async () => {
    const m = await merchant();
    expect((await m.call("/v1/merchant/chains", { chain: 31337, payout_address: newAddress() })).status).toBe(
      200,
    );
    const hooks = await receiver();
    const other = await receiver();
    const endpoint = await m.endpoint(hooks.url, ["mandate.authorized", "charge.succeeded"]);
    const otherEndpoint = await m.endpoint(other.url, ["charge.released"]);

    const mandate = (await m.call("/v1/mandates", { cap_decimal: "10", period: "month", customer: "cus_wh" }))
      .json;
    expect((await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "50" })).status).toBe(200);
    expect((await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {})).status).toBe(200);
    const charge = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    expect(charge.json.status, charge.text).toBe("pending");

    await waitUntil("mandate.authorized and charge.succeeded delivered", () =>
      ["mandate.authorized", "charge.succeeded"].every((type) =>
        hooks.received.some((r) => r.event.type === type),
      ),
    );
    // Counted once the relay has read past the charge and both endpoints have nothing pending.
    await relaySettled(31337);
    await deliveriesSettled(m.key, [endpoint.id, otherEndpoint.id]);
    expect(hooks.received.map((r) => r.event.type).sort()).toEqual([
      "charge.succeeded",
      "mandate.authorized",
    ]);
    const events = (await m.call("/v1/events?limit=100")).json.data as Array<{ id: string; type: string }>;
    for (const request of hooks.received) {
      expect(request.headers["content-type"]).toBe("application/json");
      const header = String(request.headers["x-service-signature"]);
      expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(
        verifySignature({ header, body: request.raw, secrets: endpoint.secret, now: now() }),
      ).toMatchObject({ ok: true });
      expect(Object.keys(request.event)).toEqual(["id", "object", "type", "created", "livemode", "data"]);
      expect(events.map((e) => e.id)).toContain(request.event.id);
      // Re-serialised JSON is not what was signed.
      const reserialised = JSON.stringify(JSON.parse(request.raw.toString()), null, 1);
      expect(
        verifySignature({ header, body: reserialised, secrets: endpoint.secret, now: now() }),
      ).toMatchObject({
        ok: false,
        reason: "mismatch",
      });
    }
    const authorized = hooks.received.filter((r) => r.event.type === "mandate.authorized");
    expect(authorized).toHaveLength(1);
    expect(authorized[0]?.event.data.object).toMatchObject({ id: mandate.id });
    expect(other.received).toHaveLength(0);

    const listed = await m.deliveries(endpoint.id);
    expect(
      listed.every((d) => d.status === "succeeded" && d.trigger === "event" && d.attempt_count === 1),
    ).toBe(true);
    expect(listed[0]?.attempts[0]).toMatchObject({
      number: 1,
      status_code: 200,
      error: null,
      response_body: "ok",
    });
  });

  it("records a failing attempt with its answer and schedules a retry; a redirect is not followed", async () => {
    const m = await merchant();
    const target = await receiver();
    const failing = await receiver(() => ({ status: 500, body: `boom ${"x".repeat(5000)}` }));
    const redirecting = await receiver(() => ({ status: 302, headers: { location: target.url } }));
    const failingEndpoint = await m.endpoint(failing.url);
    const redirectEndpoint = await m.endpoint(redirecting.url);
    const sent = now();
    const test = await m.call(`/v1/webhook_endpoints/${failingEndpoint.id}/test`, {});
    expect(test.status, test.text).toBe(200);
    expect(test.json).toMatchObject({
      object: "webhook_delivery",
      trigger: "test",
      event_type: "webhook.test",
    });
    await m.call(`/v1/webhook_endpoints/${redirectEndpoint.id}/test`, {});
    await waitUntil(
      "both attempts recorded",
      async () =>
        (await m.deliveries(failingEndpoint.id))[0]?.attempt_count === 1 &&
        (await m.deliveries(redirectEndpoint.id))[0]?.attempt_count === 1,
    );
    const [failed] = await m.deliveries(failingEndpoint.id);
    expect(failed).toMatchObject({ status: "pending", attempt_count: 1 });
    expect(failed?.attempts[0]).toMatchObject({
      number: 1,
      status_code: 500,
      error: "answered 500, not 2xx",
    });
    // Test mode may reach private addresses: the listing keeps only a 200-character excerpt of the answer.
    expect(failed?.attempts[0]?.response_body).toHaveLength(200);
    // The first retry waits 30 s ± 10 %.
    expect(failed?.next_attempt).toBeGreaterThanOrEqual(sent + 26);
    expect(failed?.next_attempt).toBeLessThanOrEqual(now() + 34);

    const [redirected] = await m.deliveries(redirectEndpoint.id);
    expect(redirected?.attempts[0]?.status_code).toBe(302);
    expect(redirected?.attempts[0]?.error).toContain("redirect not followed");
    expect(target.received).toHaveLength(0);
    expect(failing.received[0]?.event.type).toBe("webhook.test");
    expect(failing.received[0]?.event.data.object).toMatchObject({ object: "webhook_test" });
  });

  it("a hung endpoint does not delay another endpoint's deliveries", async () => {
    const m = await merchant();
    const hung = await receiver(() => "hang");
    const fast = await receiver();
    const hungEndpoint = await m.endpoint(hung.url);
    const fastEndpoint = await m.endpoint(fast.url);
    for (let i = 0; i < 24; i++) await m.call(`/v1/webhook_endpoints/${hungEndpoint.id}/test`, {});
    await waitUntil("the hung endpoint holds its slots", () => hung.received.length >= 16);
    for (let i = 0; i < 20; i++) await m.call(`/v1/webhook_endpoints/${fastEndpoint.id}/test`, {});
    // Seen at the moment the last fast delivery arrived: the hung endpoint still held every slot it
    // had taken (none of its attempts had been given up, which the dispatcher does only at its
    // timeout), so the fast deliveries needed nothing of it; and it held exactly 16 (at most 16 at a
    // time are in flight to one endpoint, and none had ended to free one).
    let seen: { hungAttempts: number; abandoned: number } | undefined;
    await waitUntil("every fast delivery received", () => {
      if (fast.received.length < 20) return false;
      seen = { hungAttempts: hung.received.length, abandoned: hung.abandoned.length };
      return true;
    });
    expect(seen).toEqual({ hungAttempts: 16, abandoned: 0 });
  });

  it("replays an event with the same id as a new delivery shown in the listing", async () => {
    const m = await merchant();
    let failFirst = true;
    const hooks = await receiver(() => {
      if (failFirst) {
        failFirst = false;
        return { status: 503 };
      }
      return { status: 200 };
    });
    const endpoint = await m.endpoint(hooks.url);
    const test = (await m.call(`/v1/webhook_endpoints/${endpoint.id}/test`, {})).json;
    await waitUntil("first attempt", () => hooks.received.length === 1);
    const replayed = await m.call(`/v1/events/${test.event}/replay`, {});
    expect(replayed.status, replayed.text).toBe(200);
    expect(replayed.json.data).toHaveLength(1);
    expect(replayed.json.data[0]).toMatchObject({
      trigger: "replay",
      event: test.event,
      endpoint: endpoint.id,
    });
    await waitUntil("replay received", () => hooks.received.length === 2);
    expect(hooks.received[1]?.event.id).toBe(test.event);
    expect(hooks.received[1]?.raw.toString()).toBe(hooks.received[0]?.raw.toString());

    await waitUntil("replay recorded", async () =>
      (await m.deliveries(endpoint.id, `&event=${test.event}`)).some(
        (d) => d.trigger === "replay" && d.status === "succeeded",
      ),
    );
    const forEvent = await m.deliveries(endpoint.id, `&event=${test.event}`);
    expect(forEvent.map((d) => d.trigger).sort()).toEqual(["replay", "test"]);
    const succeeded = await m.deliveries(endpoint.id, "&status=succeeded");
    expect(succeeded.map((d) => d.trigger)).toEqual(["replay"]);

    expect((await m.call("/v1/events/evt_00000000000000000000000000/replay", {})).status).toBe(404);
    const other = await merchant();
    expect((await other.call(`/v1/events/${test.event}/replay`, {})).status).toBe(404);
    expect((await other.call(`/v1/webhook_endpoints/${endpoint.id}/deliveries`)).status).toBe(404);
    const badFilter = await m.call(`/v1/webhook_endpoints/${endpoint.id}/deliveries?status=done`);
    expect(badFilter.status).toBe(400);
    expectErrorShape(badFilter.json);
  });

  it("pages the deliveries listing newest first", async () => {
    const m = await merchant();
    const hooks = await receiver();
    const endpoint = await m.endpoint(hooks.url);
    for (let i = 0; i < 5; i++) await m.call(`/v1/webhook_endpoints/${endpoint.id}/test`, {});
    const all = await m.deliveries(endpoint.id);
    expect(all).toHaveLength(5);
    const first = await m.call(`/v1/webhook_endpoints/${endpoint.id}/deliveries?limit=2`);
    expect(first.json.has_more).toBe(true);
    const second = await m.call(
      `/v1/webhook_endpoints/${endpoint.id}/deliveries?limit=2&starting_after=${first.json.data[1].id}`,
    );
    const third = await m.call(
      `/v1/webhook_endpoints/${endpoint.id}/deliveries?limit=2&starting_after=${second.json.data[1].id}`,
    );
    expect(third.json.has_more).toBe(false);
    expect(
      [...first.json.data, ...second.json.data, ...third.json.data].map((d: { id: string }) => d.id),
    ).toEqual(all.map((d) => d.id));
  });

  it("signs with both secrets during a rotation overlap, and with the new one alone after it", async () => {
    const m = await merchant();
    const hooks = await receiver();
    const endpoint = await m.endpoint(hooks.url);
    const rotated = await m.call(`/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, {});
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.json.secret).not.toBe(endpoint.secret);
    expect(rotated.json.previous_secret_expires).toBeGreaterThan(now() + 86_000);
    await m.call(`/v1/webhook_endpoints/${endpoint.id}/test`, {});
    await waitUntil("delivery during the overlap", () => hooks.received.length === 1);
    const header = String(hooks.received[0]?.headers["x-service-signature"]);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    for (const secret of [rotated.json.secret, endpoint.secret])
      expect(
        verifySignature({ header, body: hooks.received[0]?.raw ?? "", secrets: secret, now: now() }).ok,
      ).toBe(true);

    const again = await m.call(`/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, {
      expire_previous_after_seconds: 0,
    });
    expect(again.json.previous_secret_expires).toBeNull();
    await m.call(`/v1/webhook_endpoints/${endpoint.id}/test`, {});
    await waitUntil("delivery after the overlap", () => hooks.received.length === 2);
    const single = String(hooks.received[1]?.headers["x-service-signature"]);
    expect(single).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(
      verifySignature({
        header: single,
        body: hooks.received[1]?.raw ?? "",
        secrets: again.json.secret,
        now: now(),
      }).ok,
    ).toBe(true);
    expect(
      verifySignature({
        header: single,
        body: hooks.received[1]?.raw ?? "",
        secrets: rotated.json.secret,
        now: now(),
      }).ok,
    ).toBe(false);
    const bad = await m.call(`/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, {
      expire_previous_after_seconds: 604_801,
    });
    expect(expectErrorShape(bad.json).param).toBe("expire_previous_after_seconds");
  });

  it("disables, re-enables, updates and deletes an endpoint", async () => {
    const m = await merchant();
    const hooks = await receiver();
    const endpoint = await m.endpoint(hooks.url);
    const disabled = await m.call(`/v1/webhook_endpoints/${endpoint.id}`, { disabled: true });
    expect(disabled.json.status).toBe("disabled");
    const refused = await m.call(`/v1/webhook_endpoints/${endpoint.id}/test`, {});
    expect(expectErrorShape(refused.json).code).toBe("webhook_endpoint_disabled");
    const updated = await m.call(`/v1/webhook_endpoints/${endpoint.id}`, {
      disabled: false,
      events: ["charge.succeeded", "webhook.test"],
      description: "orders",
    });
    expect(updated.json).toMatchObject({
      status: "enabled",
      events: ["charge.succeeded", "webhook.test"],
      description: "orders",
    });
    const misspelt = await m.call(`/v1/webhook_endpoints/${endpoint.id}`, { events: ["charge.sucess"] });
    expect(expectErrorShape(misspelt.json).code).toBe("event_type_unknown");
    const unknownField = await m.call(`/v1/webhook_endpoints/${endpoint.id}`, { secret: "x" });
    expect(unknownField.status).toBe(400);

    const deleted = await m.call(`/v1/webhook_endpoints/${endpoint.id}`, undefined, "DELETE");
    expect(deleted.json).toEqual({ id: endpoint.id, object: "webhook_endpoint", deleted: true });
    expect((await m.call(`/v1/webhook_endpoints/${endpoint.id}`)).status).toBe(404);
    expect((await m.call(`/v1/webhook_endpoints/${endpoint.id}/deliveries`)).status).toBe(404);
    expect((await m.call("/v1/webhook_endpoints")).json.data).toHaveLength(0);
  });
});
