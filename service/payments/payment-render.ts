/** Payment records as the API shows them: with their chain's token and their payers' transfers. */
import { Context, Effect, Layer } from "effect";
import { ChainRegistry } from "../chains/registry.ts";
import { PublicUrl } from "../config/public-url.ts";
import { type PaymentObject, type PaymentRow, toPaymentObject } from "./payment-object.ts";
import { PaymentStore } from "./payment-store.ts";

const make = Effect.gen(function* () {
  const store = yield* PaymentStore;
  const registry = yield* ChainRegistry;
  const { url } = yield* PublicUrl;
  const renderMany = (rows: ReadonlyArray<PaymentRow>) =>
    Effect.gen(function* () {
      const transfers = yield* store.transfersOf(rows.map((row) => row.id));
      return rows.map(
        (row): PaymentObject =>
          toPaymentObject(
            row,
            transfers.filter((t) => t.payment_id === row.id),
            registry.byId(row.chain_id),
            url,
          ),
      );
    });
  const render = (row: PaymentRow) => Effect.map(renderMany([row]), (objects) => objects[0] as PaymentObject);
  return { render, renderMany };
});

export class PaymentRender extends Context.Service<PaymentRender>()("PaymentRender", { make }) {
  static readonly layer = Layer.effect(PaymentRender, make);
}
