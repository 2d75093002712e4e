/**
 * Thin handlers for one-time payments: decode the escrow's payment log, load its deposit address's
 * funds, let the pure ledger decide, store what it returns.
 */
import { ponder } from "ponder:registry";
import { fact, paymentFunds } from "ponder:schema";
import { Result } from "effect";
import { applyLog } from "../ledger/ledger.ts";
import { emptyLedger, paymentFundsKey } from "../ledger/types.ts";
import { factToRow, type PaymentFundsRow, paymentFundsToRow, rowToPaymentFunds } from "./ledger-rows.ts";
import { decodeOrStop } from "./log-position.ts";

type Hex = `0x${string}`;

const EVENTS = ["PaymentReceived", "PaymentReleased", "PaymentReturned"] as const;

for (const name of EVENTS) {
  ponder.on(`MandateEscrow:${name}`, async ({ event, context }) => {
    const chainId = context.chain.id;
    const log = decodeOrStop(name, event, chainId);
    if (!("depositAddress" in log)) throw new Error(`${name} decoded as ${log.kind}`);
    const key = paymentFundsKey(chainId, log.depositAddress);
    const row = await context.db.find(paymentFunds, { chainId, depositAddress: log.depositAddress as Hex });
    const state = {
      ...emptyLedger,
      payments: new Map(row ? [[key, rowToPaymentFunds(row as PaymentFundsRow)]] : []),
    };
    const applied = applyLog(state, log);
    if (Result.isFailure(applied)) throw applied.failure;
    const next = applied.success.state.payments.get(key);
    if (next) {
      const values = paymentFundsToRow(next);
      await context.db.insert(paymentFunds).values(values).onConflictDoUpdate(values);
    }
    for (const f of applied.success.facts) await context.db.insert(fact).values(factToRow(f));
  });
}
