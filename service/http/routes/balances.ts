import { Effect } from "effect";
import { BalanceStore } from "../../balances/balance-store.ts";
import {
  BalanceObject,
  BalanceTransactionObject,
  ListBalanceTransactionsQuery,
} from "../../balances/balance-transaction-object.ts";
import { listOf } from "../../chains/objects.ts";
import { invalidParam } from "../../errors.ts";
import { balance, chargeBalanceTransaction } from "../examples/balances.ts";
import { IDS, page } from "../examples/shared.ts";
import { balanceTransactionIdParam } from "../path-params.ts";
import { defineRoute } from "../route.ts";

const withLedger = Effect.service(BalanceStore);

export const balanceRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/balance",
    operationId: "retrieveBalance",
    tag: "Balance",
    summary: "Retrieve the balance",
    description:
      "Your money per chain and token: held in escrow (`pending`), paid out to you (`available`), returned (`returned`). Each amount is the sum of your balance transactions' entries of its account, so it ties out to the chain: `available` is what reached your payout address from the escrow and your customers' unheld charges, `pending` what the escrow holds for you now, `returned` what went back to customers from holds. Only movements the service confirmed count. Gas is paid by the service's relayer, not from your funds: see GET /v1/gas_costs.",
    response: BalanceObject,
    examples: { response: balance },
    handler: ({ caller }) => Effect.flatMap(withLedger, (ledger) => ledger.balance(caller)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/balance_transactions",
    operationId: "listBalanceTransactions",
    tag: "Balance",
    summary: "List balance transactions",
    description:
      "Every movement of your money, newest first: the ledger behind GET /v1/balance. One balance transaction per confirmed chain fact that moved your money: a charge or payment (into a hold, or straight to you), a release, a return. A reorganisation of the chain deeper than the confirmations never deletes one: it adds a reversal (`reverses`) at the time it was seen. Ordered by `created` (the block's time), then by when the service recorded it. Filter by `type`, `source` (a charge or payment id), `chain`, `token` and by `created` and `available_on` ranges (unix seconds, from inclusive, to exclusive). With `format=csv` or `format=json` the answer is a download of every balance transaction matching the filters, oldest first, streamed from the server however many there are (docs/exports.md gives the CSV's columns); a closed range downloads byte for byte the same every time.",
    body: ListBalanceTransactionsQuery,
    response: listOf(BalanceTransactionObject, "BalanceTransactionList"),
    examples: {
      response: page(chargeBalanceTransaction),
      errors: [invalidParam("created_to", "`created_to` must not be earlier than `created_from`.")],
    },
    handler: ({ caller, body }) => Effect.flatMap(withLedger, (ledger) => ledger.list(caller, body)),
    download: ({ caller, body }) => Effect.flatMap(withLedger, (ledger) => ledger.download(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/balance_transactions/{id}",
    params: { id: balanceTransactionIdParam },
    operationId: "retrieveBalanceTransaction",
    tag: "Balance",
    summary: "Retrieve a balance transaction",
    response: BalanceTransactionObject,
    examples: { params: { id: IDS.chargeBalanceTransaction }, response: chargeBalanceTransaction },
    handler: ({ caller, params }) =>
      Effect.flatMap(withLedger, (ledger) => ledger.retrieve(caller, params.id ?? "")),
  }),
];
