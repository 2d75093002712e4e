/**
 * The typed client (client/index.ts) against the running service: its committed types are exactly what
 * the served /v1/openapi.json generates (CI fails on drift: run `npm run client:generate`), and it
 * creates, reads and lists with typed results and typed errors, idempotently.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createBillingClient } from "../../client/index.ts";
import { CLIENT_TYPES_PATH, clientTypes } from "../../scripts/client/client-types.ts";
import { newAddress, newMerchantWithKey, stack } from "./helpers.ts";

describe("typed client", () => {
  it("has committed types that equal what the served OpenAPI document generates", async () => {
    const document = await (await fetch(`${stack().apiUrl}/v1/openapi.json`)).json();
    const generated = await clientTypes(document as object);
    const committed = readFileSync(CLIENT_TYPES_PATH, "utf8");
    // On failure: `npm run client:generate` and commit client/openapi.ts.
    expect(committed === generated, `${CLIENT_TYPES_PATH} is stale: run npm run client:generate`).toBe(true);
  });

  it("configures a chain, opens a mandate and reads it back, typed, with one object per idempotency key", async () => {
    const { key } = await newMerchantWithKey("test");
    const client = createBillingClient({ baseUrl: stack().apiUrl, apiKey: key });

    const chain = await client.POST("/v1/merchant/chains", {
      body: { chain: 31337, payout_address: newAddress() },
    });
    expect(chain.response.status, JSON.stringify(chain.error)).toBe(200);

    const opened = await client.POST("/v1/mandates", {
      params: { header: { "Idempotency-Key": `order-${key.slice(-8)}` } },
      body: { cap_decimal: "25", period: "month", customer: "cus_42" },
    });
    const mandate = opened.data;
    if (mandate === undefined) throw new Error(JSON.stringify(opened.error));
    expect(mandate.id).toMatch(/^mdt_/);
    expect(mandate.cap_decimal).toBe("25");
    expect(mandate.livemode).toBe(false);

    const again = await client.POST("/v1/mandates", {
      params: { header: { "Idempotency-Key": `order-${key.slice(-8)}` } },
      body: { cap_decimal: "25", period: "month", customer: "cus_42" },
    });
    expect(again.data?.id).toBe(mandate.id);

    const read = await client.GET("/v1/mandates/{id}", { params: { path: { id: mandate.id } } });
    expect(read.data?.customer).toBe("cus_42");
    const listed = await client.GET("/v1/mandates", { params: { query: { limit: 10 } } });
    expect(listed.data?.data.map((m) => m.id)).toEqual([mandate.id]);
  });

  it("returns the API's error shape, typed, for bad input and unknown objects", async () => {
    const { key } = await newMerchantWithKey("test");
    const client = createBillingClient({ baseUrl: stack().apiUrl, apiKey: key, maxNetworkRetries: 0 });
    const refused = await client.POST("/v1/mandates", {
      body: { cap_decimal: "-1", period: "month", customer: "cus_1" },
    });
    expect(refused.response.status).toBe(400);
    expect(refused.error?.error.type).toBe("invalid_request_error");
    expect(refused.error?.error.code).toBeTypeOf("string");

    const missing = await client.GET("/v1/mandates/{id}", {
      params: { path: { id: "mdt_00000000000000000000000000" } },
    });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.error.code).toBe("resource_missing");

    const badKey = createBillingClient({ baseUrl: stack().apiUrl, apiKey: "sk_test_nope" });
    expect((await badKey.GET("/v1/chains")).response.status).toBe(401);

    // The types follow the document: a number where the API takes a decimal string does not compile.
    // @ts-expect-error cap_decimal is a string
    await client.POST("/v1/mandates", { body: { cap_decimal: 25, period: "month", customer: "cus_1" } });
  });
});
