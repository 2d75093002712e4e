/**
 * Chain truth, rebuilt from the escrow's logs by the pure ledger (src/ledger). The service reads these
 * tables through the stable `onchain` views schema. Amounts are token base units.
 */
import { index, onchainTable, primaryKey } from "ponder";

/** The newest indexed block of each chain (confirmations are counted from it). */
export const chainHead = onchainTable("chain_head", (t) => ({
  chainId: t.integer().primaryKey(),
  blockNumber: t.bigint().notNull(),
  blockHash: t.hex().notNull(),
  timestamp: t.bigint().notNull(),
}));

export const mandate = onchainTable(
  "mandate",
  (t) => ({
    chainId: t.integer().notNull(),
    mandateId: t.hex().notNull(),
    customer: t.hex().notNull(),
    payee: t.hex().notNull(),
    token: t.hex().notNull(),
    cap: t.bigint().notNull(),
    anchor: t.bigint().notNull(),
    approvalPeriods: t.integer().notNull(),
    operator: t.hex().notNull(),
    holdSeconds: t.bigint().notNull(),
    /** Signature version: the nonce of the latest signature. */
    nonce: t.bigint().notNull(),
    approvalLeft: t.bigint().notNull(),
    /** -1 before the first charge. */
    lastChargedPeriod: t.integer().notNull(),
    status: t.text().notNull(),
    /** The log positions of the latest signature and of the latest change, as JSON. */
    authorizedAt: t.json().notNull(),
    updatedAt: t.json().notNull(),
  }),
  (table) => ({
    pk: primaryKey({ columns: [table.chainId, table.mandateId] }),
    payeeIdx: index().on(table.payee),
  }),
);

/**
 * The relayers each operator has named on the escrow (`setRelayer`): who may act for it. A removed one
 * keeps its row with `allowed` false. The ledger reads it to check who lowered a cap.
 */
export const relayer = onchainTable(
  "relayer",
  (t) => ({
    chainId: t.integer().notNull(),
    operator: t.hex().notNull(),
    relayer: t.hex().notNull(),
    allowed: t.boolean().notNull(),
    /** The log position of the latest change, as JSON. */
    updatedAt: t.json().notNull(),
  }),
  (table) => ({ pk: primaryKey({ columns: [table.chainId, table.operator, table.relayer] }) }),
);

export const charge = onchainTable(
  "charge",
  (t) => ({
    chainId: t.integer().notNull(),
    chargeId: t.hex().notNull(),
    mandateId: t.hex().notNull(),
    period: t.integer().notNull(),
    amount: t.bigint().notNull(),
    customer: t.hex().notNull(),
    payee: t.hex().notNull(),
    token: t.hex().notNull(),
    /** held | settled | released | returned */
    status: t.text().notNull(),
    releaseAt: t.bigint().notNull(),
    /** Where the charge was made on chain. */
    blockNumber: t.bigint().notNull(),
    blockHash: t.hex().notNull(),
    txHash: t.hex().notNull(),
    logIndex: t.integer().notNull(),
    timestamp: t.bigint().notNull(),
    /** The release or return, once it happened. */
    endedBlockNumber: t.bigint(),
    endedBlockHash: t.hex(),
    endedTxHash: t.hex(),
    endedLogIndex: t.integer(),
    endedTimestamp: t.bigint(),
  }),
  (table) => ({
    pk: primaryKey({ columns: [table.chainId, table.chargeId] }),
    mandateIdx: index().on(table.mandateId),
  }),
);

/** A one-time payment's funds per deposit address (src/ledger/payment-funds.ts). */
export const paymentFunds = onchainTable(
  "payment_funds",
  (t) => ({
    chainId: t.integer().notNull(),
    depositAddress: t.hex().notNull(),
    paymentId: t.hex().notNull(),
    payee: t.hex().notNull(),
    token: t.hex().notNull(),
    received: t.bigint().notNull(),
    held: t.bigint().notNull(),
    releaseAt: t.bigint().notNull(),
    released: t.bigint().notNull(),
    returned: t.bigint().notNull(),
    /** The log position of the latest change, as JSON. */
    updatedAt: t.json().notNull(),
  }),
  (table) => ({
    pk: primaryKey({ columns: [table.chainId, table.depositAddress] }),
  }),
);

/** Business facts in chain order; the service turns each into one API event once it is confirmed. */
export const fact = onchainTable(
  "fact",
  (t) => ({
    key: t.text().primaryKey(),
    kind: t.text().notNull(),
    chainId: t.integer().notNull(),
    blockNumber: t.bigint().notNull(),
    blockHash: t.hex().notNull(),
    timestamp: t.bigint().notNull(),
    txHash: t.hex().notNull(),
    logIndex: t.integer().notNull(),
    /** mandate.* and charge.* facts. */
    mandateId: t.hex(),
    chargeId: t.hex(),
    /** payment.* facts. */
    paymentId: t.hex(),
    amount: t.bigint(),
    /**
     * The fixed parties: a fact is attributed (payee = a merchant's payout address) on its own. A
     * payment has no customer on chain.
     */
    customer: t.hex(),
    payee: t.hex().notNull(),
    token: t.hex().notNull(),
    details: t.json().notNull(),
  }),
  // In the fact relay's order (chain, block, log index, key): its cursor and a new payout address's
  // history are read by a range scan that stops after a batch, however many facts share a block.
  (table) => ({
    chainBlockIdx: index().on(table.chainId, table.blockNumber, table.logIndex, table.key),
    payeeIdx: index().on(table.payee, table.chainId, table.blockNumber, table.logIndex, table.key),
  }),
);
