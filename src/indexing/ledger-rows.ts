/** Ledger state <-> Ponder rows: plain conversions, no I/O. */
import type { ChargeState, Fact, LogPosition, MandateState, PaymentFundsState } from "../ledger/types.ts";

type Hex = `0x${string}`;

export const mandateToRow = (m: MandateState) => ({
  chainId: m.chainId,
  mandateId: m.mandateId as Hex,
  customer: m.customer as Hex,
  payee: m.payee as Hex,
  token: m.token as Hex,
  cap: m.cap,
  anchor: BigInt(m.anchor),
  approvalPeriods: m.approvalPeriods,
  operator: m.operator as Hex,
  holdSeconds: BigInt(m.holdSeconds),
  nonce: m.nonce,
  approvalLeft: m.approvalLeft,
  lastChargedPeriod: m.lastChargedPeriod,
  status: m.status,
  authorizedAt: m.authorizedAt,
  updatedAt: m.updatedAt,
});

export type MandateRow = ReturnType<typeof mandateToRow>;

export const rowToMandate = (row: MandateRow): MandateState => ({
  ...row,
  anchor: Number(row.anchor),
  holdSeconds: Number(row.holdSeconds),
  status: row.status === "revoked" ? "revoked" : "active",
  authorizedAt: row.authorizedAt as LogPosition,
  updatedAt: row.updatedAt as LogPosition,
});

export const chargeToRow = (c: ChargeState) => ({
  chainId: c.chainId,
  chargeId: c.chargeId as Hex,
  mandateId: c.mandateId as Hex,
  period: c.period,
  amount: c.amount,
  customer: c.customer as Hex,
  payee: c.payee as Hex,
  token: c.token as Hex,
  status: c.status,
  releaseAt: BigInt(c.releaseAt),
  blockNumber: BigInt(c.chargedAt.blockNumber),
  blockHash: c.chargedAt.blockHash as Hex,
  txHash: c.chargedAt.txHash as Hex,
  logIndex: c.chargedAt.logIndex,
  timestamp: BigInt(c.chargedAt.timestamp),
  endedBlockNumber: c.endedAt ? BigInt(c.endedAt.blockNumber) : null,
  endedBlockHash: (c.endedAt?.blockHash ?? null) as Hex | null,
  endedTxHash: (c.endedAt?.txHash ?? null) as Hex | null,
  endedLogIndex: c.endedAt?.logIndex ?? null,
  endedTimestamp: c.endedAt ? BigInt(c.endedAt.timestamp) : null,
});

export type ChargeRow = ReturnType<typeof chargeToRow>;

const position = (
  chainId: number,
  blockNumber: bigint,
  blockHash: string,
  txHash: string,
  logIndex: number,
  timestamp: bigint,
): LogPosition => ({
  chainId,
  blockNumber: Number(blockNumber),
  blockHash,
  txHash,
  logIndex,
  timestamp: Number(timestamp),
});

export const rowToCharge = (row: ChargeRow): ChargeState => ({
  chainId: row.chainId,
  chargeId: row.chargeId,
  mandateId: row.mandateId,
  period: row.period,
  amount: row.amount,
  customer: row.customer,
  payee: row.payee,
  token: row.token,
  status: row.status,
  releaseAt: Number(row.releaseAt),
  chargedAt: position(row.chainId, row.blockNumber, row.blockHash, row.txHash, row.logIndex, row.timestamp),
  endedAt:
    row.endedBlockNumber === null ||
    row.endedBlockHash === null ||
    row.endedTxHash === null ||
    row.endedLogIndex === null ||
    row.endedTimestamp === null
      ? null
      : position(
          row.chainId,
          row.endedBlockNumber,
          row.endedBlockHash,
          row.endedTxHash,
          row.endedLogIndex,
          row.endedTimestamp,
        ),
});

export const factToRow = (f: Fact) => ({
  key: f.key,
  kind: f.kind,
  chainId: f.at.chainId,
  blockNumber: BigInt(f.at.blockNumber),
  blockHash: f.at.blockHash as Hex,
  timestamp: BigInt(f.at.timestamp),
  txHash: f.at.txHash as Hex,
  logIndex: f.at.logIndex,
  mandateId: f.mandateId as Hex | null,
  chargeId: f.chargeId as Hex | null,
  paymentId: f.paymentId as Hex | null,
  amount: f.amount,
  customer: f.customer as Hex | null,
  payee: f.payee as Hex,
  token: f.token as Hex,
  details: f.details,
});

export const paymentFundsToRow = (p: PaymentFundsState) => ({
  chainId: p.chainId,
  depositAddress: p.depositAddress as Hex,
  paymentId: p.paymentId as Hex,
  payee: p.payee as Hex,
  token: p.token as Hex,
  received: p.received,
  held: p.held,
  releaseAt: BigInt(p.releaseAt),
  released: p.released,
  returned: p.returned,
  updatedAt: p.updatedAt,
});

export type PaymentFundsRow = ReturnType<typeof paymentFundsToRow>;

export const rowToPaymentFunds = (row: PaymentFundsRow): PaymentFundsState => ({
  ...row,
  releaseAt: Number(row.releaseAt),
  updatedAt: row.updatedAt as LogPosition,
});
