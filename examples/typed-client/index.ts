/**
 * The typed-client example of docs/api-conventions.md, type-checked with the rest (`npx tsc --noEmit`). Run it against a
 * local stack: `API_KEY=sk_test_… npx node examples/typed-client/index.ts`.
 */
import { createBillingClient } from "mandate-billing/client";

const apiKey = process.env.API_KEY;
if (!apiKey) throw new Error("Set API_KEY to a test key (npm run cli -- keys create --merchant mer_…)");
const billing = createBillingClient({ baseUrl: process.env.API_URL ?? "http://127.0.0.1:4242", apiKey });

const { data: mandate, error } = await billing.POST("/v1/mandates", {
  body: { cap_decimal: "25", period: "month", customer: "cus_42" },
});
if (error) throw new Error(`${error.error.code}: ${error.error.message}`);
console.log(`send the customer to ${mandate.authorization_url}`);

const { data: page } = await billing.GET("/v1/mandates", { params: { query: { status: "active" } } });
console.log(`${page?.data.length ?? 0} active mandates`);
