import { randomBytes, randomUUID } from "node:crypto";
import { Agent, fetch } from "undici";
import { beforeAll, describe, expect, it } from "vitest";
import { merchantOnTestChain, query, stack } from "./helpers.ts";

let merchant: Awaited<ReturnType<typeof merchantOnTestChain>>;

beforeAll(async () => {
  merchant = await merchantOnTestChain();
});

/** A loopback address of this test's own, so that the stack's other clients keep their budgets. */
const loopback = () => `127.0.${2 + Math.floor(Math.random() * 250)}.${2 + Math.floor(Math.random() * 250)}`;

const hitsOf = async (keys: ReadonlyArray<string>) =>
  (
    await query<{ key: string; hits: number }>(
      "SELECT key, sum(hits)::int AS hits FROM billing.rate_limits WHERE key = ANY($1) GROUP BY key",
      [keys],
    )
  ).map((row) => ({ key: row.key, hits: Number(row.hits) }));

describe("page rate limits", () => {
  it("counts 1,000 random page tokens against their clients only: no counter of their own", async () => {
    const PAGES = ["authorize", "pay", "portal"] as const;
    const SUFFIXES = ["", "/session"] as const;
    const CLIENTS = 4; // 250 requests each: under the per-address limit (600), so every one is answered
    const tokens = Array.from({ length: 1000 }, () => randomBytes(24).toString("base64url"));
    const addresses = Array.from({ length: CLIENTS }, loopback);
    const agents = addresses.map((localAddress) => new Agent({ localAddress, connections: 16 }));
    try {
      const statuses = await Promise.all(
        tokens.map(async (token, i) => {
          const path = `/${PAGES[i % PAGES.length]}/${token}${SUFFIXES[i % SUFFIXES.length]}`;
          const response = await fetch(`${stack().apiUrl}${path}`, {
            dispatcher: agents[i % CLIENTS] as Agent,
          });
          await response.arrayBuffer();
          return response.status;
        }),
      );
      expect(statuses.filter((status) => status === 404)).toHaveLength(tokens.length);
    } finally {
      await Promise.all(agents.map((agent) => agent.close()));
    }
    expect(await hitsOf(tokens.map((token) => `page:token:${token}`))).toEqual([]);
    // Each client was counted for every request it sent.
    const clients = await hitsOf(addresses.map((address) => `page:client:v4:${address}`));
    expect(clients.map((row) => row.hits)).toEqual(addresses.map(() => tokens.length / CLIENTS));

    // A token that names a page is counted (the positive marker for the zero above).
    const opened = await merchant.call("/v1/mandates", {
      cap_decimal: "50",
      period: "month",
      customer: `cus_${randomUUID().slice(0, 8)}`,
    });
    expect(opened.status, opened.text).toBe(200);
    const known = (opened.json as { authorization_url: string }).authorization_url.split("/authorize/")[1];
    const agent = new Agent({ localAddress: loopback() });
    try {
      for (const path of [`/authorize/${known}`, `/authorize/${known}/session`]) {
        const response = await fetch(`${stack().apiUrl}${path}`, { dispatcher: agent });
        await response.arrayBuffer();
        expect(response.status).toBe(200);
      }
    } finally {
      await agent.close();
    }
    expect(await hitsOf([`page:token:${known}`])).toEqual([{ key: `page:token:${known}`, hits: 2 }]);
  });
});
