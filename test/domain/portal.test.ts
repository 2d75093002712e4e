/**
 * The customer portal's sessions and scoping on a real Postgres with the fake chain (harness.ts): a
 * link grants one customer of one merchant in one mode, nothing else (its view lists only that
 * customer's objects, its actions refuse any other's); it expires an hour after it was made (Effect's
 * TestClock); the token is stored only hashed; and bad input creates nothing.
 */
import { expect, layer } from "@effect/vitest";
import { Duration, Effect, Layer } from "effect";
import { SqlClient } from "effect/sql";
import { TestClock } from "effect/testing";
import { MerchantChains } from "../../service/chains/merchant-chains.ts";
import { Merchants } from "../../service/merchants/merchants.ts";
import type { MerchantScope } from "../../service/merchants/scope.ts";
import { PortalActions } from "../../service/portal/portal-actions.ts";
import { PORTAL_SESSION_SECONDS, PortalSessions } from "../../service/portal/portal-sessions.ts";
import { PortalViews } from "../../service/portal/portal-view.ts";
import { Prices } from "../../service/subscriptions/prices.ts";
import { Subscriptions } from "../../service/subscriptions/subscriptions.ts";
import { CHAIN, domainTestLayer, fakeChain, freshDatabase } from "./harness.ts";

const START = Date.UTC(2031, 2, 10, 12) / 1000;
const chain = fakeChain(START);
let payouts = 0;

const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("portal"), chain)),
);

const merchant = (livemode = false) =>
  Effect.gen(function* () {
    const created = yield* (yield* Merchants).create("Shop");
    const scope: MerchantScope = { merchantId: created.id, livemode };
    const payout = `0x${(++payouts).toString(16).padStart(40, "d")}`;
    yield* (yield* MerchantChains).configure(scope, { chain: CHAIN.id, payout_address: payout });
    const price = yield* (yield* Prices).create(scope, { product_name: "Plan", amount_decimal: "10" });
    return { scope, price: price.id };
  });

const tokenOf = (url: string) => url.slice(url.lastIndexOf("/") + 1);

/** The code of the API failure `effect` ends in. */
const failureCode = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.flip(effect), (error) =>
    typeof error === "object" && error !== null && "code" in error ? error.code : error,
  );

layer(testLayer, { timeout: "60 seconds" })("customer portal sessions", (it) => {
  it.effect("grants one customer of one merchant, in one mode, for an hour", () =>
    Effect.gen(function* () {
      const sessions = yield* PortalSessions;
      const shop = yield* merchant();
      yield* (yield* Subscriptions).create(shop.scope, { customer: "cus_a", price: shop.price });
      const created = yield* sessions.create(shop.scope, {
        customer: "cus_a",
        return_url: "https://shop.example/account",
      });
      expect(created).toMatchObject({
        object: "portal_session",
        livemode: false,
        customer: "cus_a",
        return_url: "https://shop.example/account",
        features: {
          subscription_cancel: { enabled: true },
          mandate_revoke: { enabled: true },
        },
      });
      expect(created.id).toMatch(/^bps_/);
      expect(created.expires_at - created.created).toBe(PORTAL_SESSION_SECONDS);
      expect(created.url).toMatch(/^http:\/\/127\.0\.0\.1:4242\/portal\/[A-Za-z0-9_-]{32}$/);

      const token = tokenOf(created.url);
      const access = yield* sessions.access(token);
      expect(access).toMatchObject({ scope: shop.scope, customer: "cus_a", session: created.id });

      // Only the token's hash is stored.
      const sql = yield* SqlClient.SqlClient;
      const stored = yield* sql<{ token_hash: string }>`SELECT token_hash FROM billing.portal_sessions
        WHERE id = ${created.id}`;
      expect(stored[0]?.token_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(JSON.stringify(stored)).not.toContain(token);

      // A second before the hour: still valid; at the hour: expired, with its own code.
      yield* TestClock.adjust(Duration.seconds(PORTAL_SESSION_SECONDS - 1));
      expect((yield* sessions.access(token)).customer).toBe("cus_a");
      yield* TestClock.adjust(Duration.seconds(1));
      expect(yield* failureCode(sessions.access(token))).toBe("portal_session_expired");

      // Unknown and malformed tokens.
      expect(yield* failureCode(sessions.access(`${token.slice(0, -1)}x`))).toBe("portal_session_not_found");
      expect(yield* failureCode(sessions.access("short"))).toBe("portal_session_not_found");
    }),
  );

  it.effect("refuses a customer the merchant does not know in that mode, and bad return URLs", () =>
    Effect.gen(function* () {
      const sessions = yield* PortalSessions;
      const one = yield* merchant();
      const other = yield* merchant();
      yield* (yield* Subscriptions).create(one.scope, { customer: "cus_b", price: one.price });
      const sql = yield* SqlClient.SqlClient;
      const count = () =>
        Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM billing.portal_sessions`,
          (rows) => rows[0]?.n,
        );
      const before = yield* count();

      // Another merchant's customer, and the same merchant's in live mode, do not exist.
      expect(yield* failureCode(sessions.create(other.scope, { customer: "cus_b" }))).toBe(
        "resource_missing",
      );
      expect(
        yield* failureCode(sessions.create({ ...one.scope, livemode: true }, { customer: "cus_b" })),
      ).toBe("resource_missing");
      for (const [url, code] of [
        ["shop.example/account", "url_invalid"],
        ["ftp://shop.example", "url_invalid"],
        ["https://user:pw@shop.example", "url_invalid"],
        ["https://shop.example/a b", "url_invalid"],
        ["http://shop.example/account", "url_insecure"],
        [`https://shop.example/${"a".repeat(2048)}`, "url_invalid"],
      ] as const)
        expect(yield* failureCode(sessions.create(one.scope, { customer: "cus_b", return_url: url }))).toBe(
          code,
        );
      expect(yield* count()).toBe(before);

      // Loopback http in test mode (a merchant's local site), with the cancel feature switched off.
      const local = yield* sessions.create(one.scope, {
        customer: "cus_b",
        return_url: "http://127.0.0.1:3000/account",
        features: { subscription_cancel: { enabled: false } },
      });
      expect(local.features.subscription_cancel.enabled).toBe(false);
      expect(local.return_url).toBe("http://127.0.0.1:3000/account");
    }),
  );

  it.effect("shows and acts on one customer's objects of one merchant and mode, nothing else", () =>
    Effect.gen(function* () {
      const sessions = yield* PortalSessions;
      const views = yield* PortalViews;
      const actions = yield* PortalActions;
      const subscriptions = yield* Subscriptions;
      const shop = yield* merchant();
      const other = yield* merchant();
      const mine = yield* subscriptions.create(shop.scope, { customer: "cus_c", price: shop.price });
      const neighbour = yield* subscriptions.create(shop.scope, { customer: "cus_d", price: shop.price });
      const elsewhere = yield* subscriptions.create(other.scope, { customer: "cus_c", price: other.price });
      const created = yield* sessions.create(shop.scope, { customer: "cus_c" });
      const access = yield* sessions.access(tokenOf(created.url));

      const view = yield* views.view(access);
      expect(view.mandates.map((m) => m.id)).toEqual([mine.mandate]);
      expect(view.subscriptions.map((s) => s.id)).toEqual([mine.id]);
      expect(view.mandates[0]).toMatchObject({ signature_wanted: true, subscription: mine.id });

      for (const id of [neighbour.id, elsewhere.id, "sub_01JD3ZZZZZZZZZZZZZZZZZZZZZ"])
        expect(yield* failureCode(actions.cancelSubscription(access, id))).toBe("resource_missing");
      for (const [scope, id] of [
        [shop.scope, neighbour.id],
        [other.scope, elsewhere.id],
      ] as const)
        expect((yield* subscriptions.retrieve(scope, id)).status).toBe("incomplete");
      expect(yield* views.mandateOf(access, neighbour.mandate)).toBeUndefined();
      expect(yield* views.mandateOf(access, elsewhere.mandate)).toBeUndefined();
      expect((yield* views.mandateOf(access, mine.mandate))?.id).toBe(mine.mandate);

      // Its own: canceled, as the customer's (an incomplete subscription has no period to finish).
      yield* actions.cancelSubscription(access, mine.id);
      const ended = yield* subscriptions.retrieve(shop.scope, mine.id);
      expect(ended).toMatchObject({ status: "canceled", cancellation_source: "portal" });
      expect((yield* views.view(access)).subscriptions).toEqual([]);
    }),
  );
});
