/**
 * Charges as merchants make and read them: a charge against a mandate (through the charge engine,
 * charge-batches.ts), the listing and retrieval, and the return of a held charge during its hold.
 * Chain facts move a sent charge to succeeded, released or returned (facts/fact-application.ts).
 */
import { Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Hex } from "viem";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { unavailable } from "../chains/unavailable.ts";
import { type Page, renderPage } from "../db/query.ts";
import { InvalidRequest, type NotFound, type Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { PageQuery } from "../pagination.ts";
import { ChargeBatches } from "./charge-batches.ts";
import { type ChargeObject, type ChargeRow, toChargeObject } from "./charge-object.ts";
import { ChargeStore } from "./charge-store.ts";

export const CreateCharge = Schema.Struct({
  amount_decimal: Schema.String.annotate({
    description: "Amount in the token's units, at most the mandate's cap, e.g. \"19.99\"",
  }),
}).annotate({ identifier: "CreateChargeRequest" });
export type CreateCharge = typeof CreateCharge.Type;

export const ListChargesQuery = Schema.Struct({ ...PageQuery.fields }).annotate({
  identifier: "ListChargesQuery",
});
export type ListChargesQuery = typeof ListChargesQuery.Type;

type Failure = InvalidRequest | NotFound | Unavailable | SqlError.SqlError;

/** Each return attempt is its own transaction; the action lets at most one be pending or mined. */
export const returnAction = (chainId: number, chargeOnchainId: string | null) =>
  `return:${chainId}:${chargeOnchainId}`;

export class Charges extends Context.Service<
  Charges,
  {
    readonly create: (
      scope: MerchantScope,
      mandateId: string,
      input: CreateCharge,
    ) => Effect.Effect<ChargeObject, Failure>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<ChargeObject, NotFound | SqlError.SqlError>;
    readonly listForMandate: (
      scope: MerchantScope,
      mandateId: string,
      query: ListChargesQuery,
    ) => Effect.Effect<Page<ChargeObject>, InvalidRequest | NotFound | SqlError.SqlError>;
    readonly returnCharge: (scope: MerchantScope, id: string) => Effect.Effect<ChargeObject, Failure>;
    readonly render: (row: ChargeRow) => ChargeObject;
  }
>()("Charges") {
  static readonly layer = Layer.effect(
    Charges,
    Effect.gen(function* () {
      const registry = yield* ChainRegistry;
      const tokenStates = yield* TokenStates;
      const clients = yield* ChainClients;
      const heads = yield* ChainHeads;
      const relayer = yield* Relayer;
      const batches = yield* ChargeBatches;
      const store = yield* ChargeStore;
      const gasCosts = yield* GasCosts;
      const mandates = yield* MandateStore;
      const render = (row: ChargeRow) => toChargeObject(row, registry.byId(row.chain_id));

      const create = (scope: MerchantScope, mandateId: string, input: CreateCharge) =>
        Effect.gen(function* () {
          const [outcome] = yield* batches.send([
            { scope, mandateId, amount: { decimal: input.amount_decimal } },
          ]);
          if (outcome === undefined) return yield* Effect.die(new Error("no charge outcome"));
          const id = yield* Effect.fromResult(outcome);
          return render(yield* store.reload(id));
        });

      const retrieve = (scope: MerchantScope, id: string) => Effect.map(store.load(scope, id), render);

      const listForMandate = (scope: MerchantScope, mandateId: string, query: ListChargesQuery) =>
        Effect.gen(function* () {
          yield* mandates.load(scope, mandateId);
          return renderPage(yield* store.pageForMandate(mandateId, query), render);
        });

      const returnCharge = (scope: MerchantScope, id: string) =>
        Effect.gen(function* () {
          const charge = yield* store.load(scope, id, { lock: true });
          const chain = registry.byId(charge.chain_id);
          if (!chain) return yield* Effect.die(new Error(`charge ${id} is on an unknown chain`));
          yield* tokenStates.guard(chain, charge.token_address);
          const refuse = (why: string) =>
            new InvalidRequest({ code: "charge_not_returnable", message: why, param: null });
          if (charge.status !== "succeeded" || charge.release_at === null || charge.release_at === 0)
            return yield* refuse(
              charge.status === "succeeded"
                ? "This charge was paid straight to you (no escrow hold), so the escrow cannot return it."
                : `Only a charge held in escrow can be returned; this one is ${charge.status}.`,
            );
          if (charge.pending_action !== null)
            return yield* refuse(`A ${charge.pending_action} of this charge is already under way.`);
          const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
          if (now >= charge.release_at)
            return yield* refuse("The hold has ended; the money is being released to you.");
          const mandate = yield* mandates.load(scope, charge.mandate_id);
          const args = [mandate.onchain_id, charge.period];
          const refused = yield* clients
            .simulateOutcome(
              chain,
              relayer.address(chain.id) ?? (mandate.operator_address as Hex),
              "returnCharge",
              args,
            )
            .pipe(Effect.mapError(unavailable));
          if (refused !== undefined)
            return yield* refuse(`The escrow refused the return (${refused.reason ?? refused.errorName}).`);
          const action = returnAction(chain.id, charge.onchain_id);
          const sent = yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data: escrowCallData("returnCharge", args),
              purpose: `${action}:${yield* newId("request")}`,
              action,
              merchants: [charge.merchant_id],
            })
            .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
          yield* store.startAction(id, "return", sent.purpose);
          yield* gasCosts.carries(chain.id, sent.purpose, "return", "charge", [id]);
          return render(yield* store.reload(id));
        });

      return { create, retrieve, listForMandate, returnCharge, render };
    }),
  );
}
