import { readFileSync } from "node:fs";
import { Effect } from "effect";
import { describe, expect, it } from "vitest";
import { minPaymentUnits, parseChainsFile } from "../../service/chains/config.ts";

const valid = {
  id: 8453,
  name: "Base",
  livemode: true,
  rpc: { http: ["https://rpc.example"], ws: "wss://rpc.example" },
  native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
  escrow: { address: "0x1111111111111111111111111111111111111111", start_block: 100 },
  tokens: [{ symbol: "USDC", decimals: 6, address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" }],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: true,
  hold_seconds: 86_400,
  confirmations: 3,
};

const problem = (chains: unknown[]) =>
  Effect.runPromise(Effect.flip(parseChainsFile(JSON.stringify({ chains }), "chains.json"))).then(
    (e) => e.message,
  );

describe("chain config", () => {
  it("accepts the shipped local config and a live chain", async () => {
    const shipped = readFileSync("config/chains.json", "utf8");
    await expect(Effect.runPromise(parseChainsFile(shipped, "config/chains.json"))).resolves.toBeDefined();
    await expect(
      Effect.runPromise(parseChainsFile(JSON.stringify({ chains: [valid] }), "x")),
    ).resolves.toBeDefined();
    const unbatched = { ...valid, rpc: { ...valid.rpc, batch_size: 0 } };
    await expect(
      Effect.runPromise(parseChainsFile(JSON.stringify({ chains: [unbatched] }), "x")),
    ).resolves.toBeDefined();
    const safes = { ...valid, wallet_factories: ["0x4e1DCf7AD4e460CfD30791CCC4F9c8a4f820ec67"] };
    await expect(
      Effect.runPromise(parseChainsFile(JSON.stringify({ chains: [safes] }), "x")),
    ).resolves.toBeDefined();
  });

  it.each([
    [{ ...valid, id: -1 }, "chains[0].id"],
    [{ ...valid, rpc: { http: ["ftp://x"] } }, "chains[0].rpc.http[0]"],
    [{ ...valid, rpc: undefined }, "chains[0].rpc"],
    [{ ...valid, native_currency: undefined }, "chains[0].native_currency"],
    [
      { ...valid, native_currency: { name: "Ether", symbol: "ETH", decimals: 99 } },
      "chains[0].native_currency.decimals",
    ],
    [{ ...valid, rpc: { ...valid.rpc, batch_size: 1001 } }, "chains[0].rpc.batch_size"],
    [{ ...valid, rpc: { ...valid.rpc, batch_size: 2.5 } }, "chains[0].rpc.batch_size"],
    [{ ...valid, tokens: [{ ...valid.tokens[0], address: "0x12" }] }, "chains[0].tokens[0].address"],
    [{ ...valid, tokens: [{ symbol: "USDC", decimals: 6 }] }, "chains[0].tokens[0].address"],
    [{ ...valid, tokens: [{ ...valid.tokens[0], decimals: 99 }] }, "chains[0].tokens[0].decimals"],
    [{ ...valid, escrow_available: false }, "chains[0].hold_seconds"],
    [{ ...valid, subscriptions_available: "yes" }, "chains[0].subscriptions_available"],
    [{ ...valid, payments_available: 1 }, "chains[0].payments_available"],
    [{ ...valid, payments_available: undefined }, "chains[0].payments_available"],
    [{ ...valid, local: { port: 8545 } }, "chains[0].livemode"],
    [{ ...valid, colour: "blue" }, "chains[0].colour"],
    [{ ...valid, wallet_factories: ["0x12"] }, "chains[0].wallet_factories[0]"],
    [
      { ...valid, wallet_factories: "0x4e1DCf7AD4e460CfD30791CCC4F9c8a4f820ec67" },
      "chains[0].wallet_factories",
    ],
    [
      { ...valid, tokens: [{ ...valid.tokens[0], min_payment: "0.0000001" }] },
      "chains[0].tokens[0].min_payment",
    ],
    [{ ...valid, tokens: [{ ...valid.tokens[0], min_payment: "0" }] }, "chains[0].tokens[0].min_payment"],
    [{ ...valid, tokens: [{ ...valid.tokens[0], min_payment: "-1" }] }, "chains[0].tokens[0].min_payment"],
    [{ ...valid, tokens: [{ ...valid.tokens[0], min_payment: 1 }] }, "chains[0].tokens[0].min_payment"],
  ])("names the bad field (%#)", async (chain, field) => {
    expect(await problem([chain])).toContain(field);
  });

  it("gives each token's smallest payment: its min_payment, or 0.01 of the token", async () => {
    const file = await Effect.runPromise(
      parseChainsFile(
        JSON.stringify({ chains: [{ ...valid, tokens: [{ ...valid.tokens[0], min_payment: "0.5" }] }] }),
        "x",
      ),
    );
    expect(minPaymentUnits(file.chains[0]?.tokens[0] ?? { decimals: 0 })).toBe(500_000n);
    expect(minPaymentUnits({ decimals: 6 })).toBe(10_000n);
    expect(minPaymentUnits({ decimals: 18 })).toBe(10n ** 16n);
    expect(minPaymentUnits({ decimals: 2 })).toBe(1n);
    expect(minPaymentUnits({ decimals: 0 })).toBe(1n);
  });

  it("refuses a chain listed twice", async () => {
    expect(await problem([valid, valid])).toContain("chains[1].id");
  });

  it("refuses text that is not JSON", async () => {
    const message = await Effect.runPromise(Effect.flip(parseChainsFile("{", "chains.json"))).then(
      (e) => e.message,
    );
    expect(message).toContain("not valid JSON");
  });
});
