import { Effect, Layer, Schedule } from "effect";
import { describe, expect, it } from "vitest";
import { ChainClients } from "../../service/chains/chain-clients.ts";
import { ChainHeads } from "../../service/chains/chain-heads.ts";
import { ChainRegistry } from "../../service/chains/registry.ts";
import { chainDriver } from "./chain-driver.ts";
import { DEV_API_KEY } from "./constants.ts";
import { api, expectErrorShape, newAddress, newMerchantWithKey, query, stack } from "./helpers.ts";

describe("GET /v1/chains", () => {
  it("shows a test key every test chain, with independent subscriptions_available and escrow_available", async () => {
    const { key } = await newMerchantWithKey("test");
    const response = await api("/v1/chains", { key });
    expect(response.status).toBe(200);
    expect(response.json.object).toBe("list");
    const chains = response.json.data as Array<Record<string, unknown>>;
    expect(chains.map((c) => c.id).sort()).toEqual([31337, 31339]);
    const open = chains.find((c) => c.id === 31337);
    const closed = chains.find((c) => c.id === 31339);
    expect(open).toMatchObject({
      object: "chain",
      livemode: false,
      subscriptions_available: true,
      payments_available: true,
      escrow_available: true,
    });
    expect(closed).toMatchObject({ livemode: false, subscriptions_available: false, escrow_available: true });
    expect(open?.escrow_contract).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(open?.tokens).toEqual([
      { symbol: "USDC", address: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/), decimals: 6 },
    ]);
  });

  it("shows a live key only live chains", async () => {
    const { key } = await newMerchantWithKey("live");
    const response = await api("/v1/chains", { key });
    expect(response.status).toBe(200);
    expect(response.json.data).toEqual([
      expect.objectContaining({
        id: 31338,
        livemode: true,
        subscriptions_available: false,
        payments_available: false,
        escrow_available: false,
        hold_seconds: 0,
      }),
    ]);
  });
});

describe("the local stack's test merchant", () => {
  it("uses DEV_API_KEY as its key and has every local test chain configured", async () => {
    expect(stack().apiKey).toBe(DEV_API_KEY);
    const response = await api("/v1/merchant/chains");
    expect(response.status).toBe(200);
    expect((response.json.data as Array<{ chain: number }>).map((c) => c.chain).sort()).toEqual([
      31337, 31339,
    ]);
  });
});

describe("/v1/merchant/chains", () => {
  it("starts empty, then lists what the merchant configured, with subscriptions_available", async () => {
    const { key } = await newMerchantWithKey("test");
    const PAYOUT = newAddress();
    expect((await api("/v1/merchant/chains", { key })).json.data).toEqual([]);
    const configured = await api("/v1/merchant/chains", {
      key,
      body: { chain: 31339, payout_address: PAYOUT.toLowerCase() },
    });
    expect(configured.status).toBe(200);
    expect(configured.json).toMatchObject({
      object: "merchant_chain",
      id: expect.stringMatching(/^mch_/),
      chain: 31339,
      livemode: false,
      subscriptions_available: false,
      payments_available: true,
      escrow_available: true,
      payout_address: PAYOUT,
      tokens: [expect.objectContaining({ symbol: "USDC" })],
    });
    const listed = await api("/v1/merchant/chains", { key });
    expect(listed.json.data).toEqual([configured.json]);
  });

  it("replaces the configuration of a chain and keeps the old one for audit", async () => {
    const { merchantId, key } = await newMerchantWithKey("test");
    const PAYOUT = newAddress();
    const first = await api("/v1/merchant/chains", { key, body: { chain: 31337, payout_address: PAYOUT } });
    const second = await api("/v1/merchant/chains", {
      key,
      body: { chain: 31337, payout_address: newAddress(), tokens: ["USDC"] },
    });
    expect(second.json.id).not.toBe(first.json.id);
    const listed = await api("/v1/merchant/chains", { key });
    expect(listed.json.data).toEqual([second.json]);
    const rows = await query<{ superseded: boolean }>(
      "SELECT superseded_at IS NOT NULL AS superseded FROM billing.merchant_chains WHERE merchant_id = $1 ORDER BY id",
      [merchantId],
    );
    expect(rows).toEqual([{ superseded: true }, { superseded: false }]);
  });

  it("refuses bad input with a 400 naming the param, and changes nothing", async () => {
    const { merchantId, key } = await newMerchantWithKey("test");
    const PAYOUT = newAddress();
    const other = await newMerchantWithKey("test");
    const taken = newAddress();
    expect(
      (await api("/v1/merchant/chains", { key: other.key, body: { chain: 31337, payout_address: taken } }))
        .status,
    ).toBe(200);
    const cases: Array<[unknown, string, string | null]> = [
      [{ chain: 31338, payout_address: PAYOUT }, "chain_unknown", "chain"], // a live chain, with a test key
      [{ chain: 1, payout_address: PAYOUT }, "chain_unknown", "chain"],
      [{ chain: 31337, payout_address: "0x1234" }, "parameter_invalid", "payout_address"],
      [
        { chain: 31337, payout_address: "0x0000000000000000000000000000000000000000" },
        "parameter_invalid",
        "payout_address",
      ],
      [{ chain: 31337, payout_address: PAYOUT, tokens: ["DAI"] }, "token_unknown", "tokens[0]"],
      [{ chain: 31337, payout_address: PAYOUT, tokens: [] }, "parameter_invalid", "tokens"],
      [{ chain: "31337", payout_address: PAYOUT }, "parameter_invalid", "chain"],
      [{ chain: 31337.5, payout_address: PAYOUT }, "parameter_invalid", "chain"],
      [{ payout_address: PAYOUT }, "parameter_missing", "chain"],
      [{ chain: 31337, payout_address: PAYOUT, colour: "blue" }, "parameter_unknown", "colour"],
      [{ chain: 31337, payout_address: taken }, "payout_address_in_use", "payout_address"],
    ];
    for (const [body, code, param] of cases) {
      const response = await api("/v1/merchant/chains", { key, body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      const error = expectErrorShape(response.json);
      expect(error.type).toBe("invalid_request_error");
      expect([error.code, error.param], JSON.stringify(body)).toEqual([code, param]);
    }
    const rows = await query("SELECT 1 FROM billing.merchant_chains WHERE merchant_id = $1", [merchantId]);
    expect(rows).toEqual([]);
  });
});

describe("chain heads (service/chains/chain-heads.ts) on the stack's anvil", () => {
  it("a new block reaches the cache through the node's newHeads subscription, without a poll", async () => {
    const chain = chainDriver(31337);
    expect(chain.resolved.rpc.ws).toMatch(/^ws:/);
    const hour = 3_600_000;
    // Polled once at start and trusted for an hour: only the subscription can bring a newer head.
    const heads = ChainHeads.layer({ pollEveryMillis: hour, maxAgeMillis: hour }).pipe(
      Layer.provide(Layer.mergeAll(ChainRegistry.fromChains([chain.resolved]), ChainClients.layer)),
    );
    const program = Effect.gen(function* () {
      const cache = yield* ChainHeads;
      yield* cache.latestBlock(chain.resolved);
      // The subscription opens in the background: mine until one of its heads arrives.
      for (let attempt = 0; attempt < 25; attempt++) {
        yield* Effect.promise(() => chain.mine());
        const mined = yield* Effect.promise(() => chain.client.getBlock({ blockTag: "latest" }));
        const seen = yield* cache.latestBlock(chain.resolved).pipe(
          Effect.repeat({
            schedule: Schedule.spaced("20 millis"),
            until: (head) => head.number >= mined.number,
          }),
          Effect.timeoutOption("400 millis"),
        );
        if (seen._tag === "Some") return { seen: seen.value, mined };
      }
      return yield* Effect.die("no head arrived through the subscription");
    });
    const { seen, mined } = await Effect.runPromise(Effect.provide(program, heads));
    expect(seen.number >= mined.number).toBe(true);
    const block = await chain.client.getBlock({ blockNumber: seen.number });
    expect(seen.timestamp).toBe(Number(block.timestamp));
  });
});
