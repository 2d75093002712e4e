/**
 * The API shapes of the merchant's ledger: balance transactions (`GET /v1/balance_transactions`), the
 * balance (`GET /v1/balance`) and their queries.
 */
import { Schema } from "effect";
import { DOWNLOAD_FORMATS } from "../downloads.ts";
import { ID_PATTERN } from "../ids.ts";
import { PageQuery } from "../pagination.ts";
import { ChainId, UnixSeconds } from "../query-fields.ts";
import { ACCOUNTS, MOVEMENT_TYPES } from "./movements.ts";

export const Units = (description: string) =>
  Schema.String.annotate({ description: `${description}, in the token's base units (integer string)` });
const Decimal = (description: string) =>
  Schema.String.annotate({ description: `${description}, in the token's units (decimal string)` });
const Address = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{40}$/));

export const BALANCE_EFFECTS = ["pending", "available", "returned"] as const;

const LedgerEntry = Schema.Struct({
  account: Schema.Literals(ACCOUNTS).annotate({
    description:
      "customer: money from outside (customers' wallets); pending: held in escrow for you; available: reached your payout address; returned: went back to a customer from a hold",
  }),
  amount: Units("Signed change of the account"),
}).annotate({ identifier: "LedgerEntry" });

export const BalanceTransactionObject = Schema.Struct({
  id: Schema.String.annotate({ description: "txn_…" }),
  object: Schema.Literal("balance_transaction"),
  livemode: Schema.Boolean,
  type: Schema.Literals(MOVEMENT_TYPES).annotate({
    description:
      "charge: a mandate charge (into the hold, or straight to you); payment: a deposit address swept; release / payment_release: a hold paid out to you; return / payment_return: a hold given back to the customer",
  }),
  amount: Units(
    "Signed, as it changes your money: + money in (a charge or payment, into the hold or straight to you) or made available (a release), − money returned; a reversal has the opposite sign",
  ),
  amount_decimal: Decimal("`amount`"),
  balance_effect: Schema.Literals(BALANCE_EFFECTS).annotate({
    description: "The balance this transaction changes by `amount` (see GET /v1/balance)",
  }),
  entries: Schema.Array(LedgerEntry).annotate({
    description:
      "The double entry underneath: two legs between your accounts that sum to zero (a charge into the hold: customer −a, pending +a)",
  }),
  reverses: Schema.NullOr(Schema.String).annotate({
    description:
      "A reversal: the id of the balance transaction a chain reorganisation took back (its legs negated). Rows are never changed or deleted; the reversed one keeps its place",
  }),
  source: Schema.NullOr(Schema.String).annotate({
    description: "The object that moved the money: a charge (ch_…) or payment (pay_…)",
  }),
  invoice: Schema.NullOr(Schema.String).annotate({
    description: "The invoice the charge paid (inv_…), if any",
  }),
  chain: Schema.Int,
  currency: Schema.String.annotate({ description: "Token symbol" }),
  token_address: Schema.String,
  gas: Schema.NullOr(
    Schema.Struct({
      amount_wei: Schema.String.annotate({
        description: "This movement's share of its transaction's gas, in wei of the chain's native currency",
      }),
      currency: Schema.String.annotate({ description: "The native currency's symbol" }),
    }).annotate({ identifier: "BalanceTransactionGas" }),
  ).annotate({
    description:
      "The gas the service's relayer paid to move this money (as GET /v1/gas_costs splits it): paid by the service, never from your balance. null: a transaction not the service's (a charge by another operator), a reversal, or a receipt not recorded yet",
  }),
  block: Schema.Struct({
    number: Schema.Int,
    hash: Schema.String,
  }).annotate({ identifier: "BalanceTransactionBlock" }),
  transaction_hash: Schema.String,
  log_index: Schema.Int,
  created: Schema.Int.annotate({
    description:
      "Unix seconds: the time of the block that moved the money (of a reversal: of the chain's head when the reorganisation was seen)",
  }),
  available_on: Schema.Int.annotate({
    description: "Unix seconds: when held money can be released to you (the hold's end); else `created`",
  }),
}).annotate({ identifier: "BalanceTransaction" });
export type BalanceTransactionObject = typeof BalanceTransactionObject.Type;

const From = (field: string) =>
  Schema.optionalKey(UnixSeconds.annotate({ description: `Earliest \`${field}\`, unix seconds, inclusive` }));
const To = (field: string) =>
  Schema.optionalKey(UnixSeconds.annotate({ description: `Latest \`${field}\`, unix seconds, exclusive` }));

export const ListBalanceTransactionsQuery = Schema.Struct({
  ...PageQuery.fields,
  type: Schema.optionalKey(Schema.Literals(MOVEMENT_TYPES)),
  source: Schema.optionalKey(
    Schema.String.check(Schema.isPattern(ID_PATTERN)).annotate({
      description: "Only the movements of this object (a charge or payment id)",
    }),
  ),
  chain: Schema.optionalKey(ChainId.annotate({ description: "Only this chain (EIP-155 id)" })),
  token: Schema.optionalKey(Address.annotate({ description: "Only this token (its address, any case)" })),
  created_from: From("created"),
  created_to: To("created"),
  available_on_from: From("available_on"),
  available_on_to: To("available_on"),
  format: Schema.optionalKey(
    Schema.Literals(DOWNLOAD_FORMATS).annotate({
      description:
        "Download every balance transaction matching the filters, oldest first, streamed: csv (the columns of docs/exports.md) or json (an array of balance transactions). Not with limit or the cursors",
    }),
  ),
}).annotate({ identifier: "ListBalanceTransactionsQuery" });
export type ListBalanceTransactionsQuery = typeof ListBalanceTransactionsQuery.Type;

const BalanceAmount = Schema.Struct({
  chain: Schema.Int,
  currency: Schema.String.annotate({ description: "Token symbol" }),
  token_address: Schema.String,
  pending: Units("Held in escrow for you now: charged or paid into a hold, not released or returned yet"),
  pending_decimal: Decimal("`pending`"),
  available: Units("Everything that reached your payout address: unheld charges and payments, and releases"),
  available_decimal: Decimal("`available`"),
  returned: Units("Everything given back to customers from holds"),
  returned_decimal: Decimal("`returned`"),
}).annotate({ identifier: "BalanceAmount" });
export type BalanceAmount = typeof BalanceAmount.Type;

export const BalanceObject = Schema.Struct({
  object: Schema.Literal("balance"),
  livemode: Schema.Boolean,
  amounts: Schema.Array(BalanceAmount).annotate({
    description:
      "One entry per chain and token you have movements on, by chain then token address; each the sum of the balance transactions' entries of its account",
  }),
}).annotate({ identifier: "Balance" });
export type BalanceObject = typeof BalanceObject.Type;
