import { describe, expect, it } from "vitest";
import { chargeToRow, mandateToRow, rowToCharge, rowToMandate } from "../../src/indexing/ledger-rows.ts";
import type { ChargeState, LogPosition, MandateState } from "../../src/ledger/types.ts";

const at = (block: number): LogPosition => ({
  chainId: 31337,
  blockNumber: block,
  blockHash: `0x${block.toString(16).padStart(64, "0")}`,
  timestamp: 1_700_000_000 + block,
  txHash: `0x${(block * 7).toString(16).padStart(64, "0")}`,
  logIndex: block % 5,
});

const charge: ChargeState = {
  chainId: 31337,
  chargeId: `0x${"a".repeat(64)}`,
  mandateId: `0x${"b".repeat(64)}`,
  period: 3,
  amount: 12_500_000n,
  customer: "0x00000000000000000000000000000000000000c0",
  payee: "0x00000000000000000000000000000000000000b0",
  token: "0x00000000000000000000000000000000000000a1",
  status: "held",
  releaseAt: 1_700_003_600,
  chargedAt: at(10),
  endedAt: null,
};

const mandate: MandateState = {
  chainId: 31337,
  mandateId: `0x${"b".repeat(64)}`,
  customer: "0x00000000000000000000000000000000000000c0",
  payee: "0x00000000000000000000000000000000000000b0",
  token: "0x00000000000000000000000000000000000000a1",
  cap: 50_000_000n,
  anchor: 1_700_000_000,
  approvalPeriods: 12,
  operator: "0x00000000000000000000000000000000000000ee",
  holdSeconds: 3600,
  nonce: 2n,
  approvalLeft: 37_500_000n,
  lastChargedPeriod: 3,
  status: "active",
  authorizedAt: at(4),
  updatedAt: at(10),
};

describe("ledger state as indexer rows", () => {
  it("round-trips a charge, held and ended, with its chain positions in columns", () => {
    expect(rowToCharge(chargeToRow(charge))).toEqual(charge);
    const ended: ChargeState = { ...charge, status: "released", endedAt: at(20) };
    const row = chargeToRow(ended);
    expect([row.blockNumber, row.txHash, row.logIndex, row.endedBlockNumber]).toEqual([
      10n,
      at(10).txHash,
      0,
      20n,
    ]);
    expect(rowToCharge(row)).toEqual(ended);
  });

  it("round-trips a mandate", () => {
    expect(rowToMandate(mandateToRow(mandate))).toEqual(mandate);
  });
});
