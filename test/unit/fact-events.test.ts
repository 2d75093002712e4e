import { describe, expect, it } from "vitest";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { eventIdForFact } from "../../service/events/event-ids.ts";
import { type ConfirmedFact, eventFromFact } from "../../service/events/fact-events.ts";
import { ID_PATTERN } from "../../service/ids.ts";

const chain: ResolvedChain = {
  id: 31337,
  name: "Local",
  livemode: false,
  rpc: { http: ["http://127.0.0.1:8545"] },
  escrow: { address: "0x0000000000000000000000000000000000000e5c", start_block: 1 },
  tokens: [{ symbol: "USDC", decimals: 6, address: "0x00000000000000000000000000000000000000a1" }],
  subscriptions_available: true,
  escrow_available: true,
  hold_seconds: 600,
  confirmations: 0,
};

const fact: ConfirmedFact = {
  key: "31337:charge.succeeded:0xabc",
  kind: "charge.succeeded",
  chain_id: 31337,
  block_number: "12",
  block_hash: `0x${"1".repeat(64)}`,
  timestamp: "1700000000",
  tx_hash: `0x${"2".repeat(64)}`,
  log_index: 3,
  mandate_id: `0x${"3".repeat(64)}`,
  charge_id: "0xabc",
  amount: "1500000",
  details: { period: 2, release_at: 1700000600, approval_left: "0" },
  customer: "0x00000000000000000000000000000000000000c0",
  payee: "0x00000000000000000000000000000000000000b0",
  token: "0x00000000000000000000000000000000000000a1",
  merchant_id: "mer_x",
};

describe("events from facts", () => {
  it("derive the same id from the same fact, whoever relays it, sortable by chain time", () => {
    expect(eventIdForFact(fact.key, 1_700_000_000)).toBe(eventIdForFact(fact.key, 1_700_000_000));
    expect(eventIdForFact(fact.key, 1_700_000_000)).toMatch(ID_PATTERN);
    expect(eventIdForFact("another", 1_700_000_000)).not.toBe(eventIdForFact(fact.key, 1_700_000_000));
    expect(eventIdForFact("z", 1_700_000_000) < eventIdForFact("a", 1_700_000_001)).toBe(true);
    expect(eventFromFact(fact, chain)).toEqual(eventFromFact({ ...fact }, chain));
  });

  it("describe the charge as the fact recorded it", () => {
    const event = eventFromFact(fact, chain);
    expect(event.payload).toEqual({
      id: event.id,
      object: "event",
      type: "charge.succeeded",
      created: 1_700_000_000,
      livemode: false,
      data: {
        object: expect.objectContaining({
          object: "charge",
          amount: "1500000",
          amount_decimal: "1.5",
          token: "USDC",
          period: 2,
          status: "held",
          release_at: 1_700_000_600,
          onchain: {
            chain: 31337,
            block_number: 12,
            block_hash: fact.block_hash,
            transaction_hash: fact.tx_hash,
            log_index: 3,
          },
        }),
      },
    });
  });
});
