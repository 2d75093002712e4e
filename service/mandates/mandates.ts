/**
 * Mandates as merchants open, read and update them. A mandate fixes the terms the customer will sign
 * (chain, token, payee, cap, approval periods, anchor, hold, operator); chain facts then move its status
 * (facts/fact-application.ts) and charges spend it (charges/). Records are written by mandate-store.ts.
 *
 * Changing the cap of a signed mandate (`update`): a raise needs the customer's signature, so it waits
 * as the mandate's pending update (the old cap stays in force and chargeable) until the customer signs
 * the new terms at the same authorization_url and the chain records them; a lower only narrows what the
 * customer signed, so it is in force at once here (charges above it are refused from this moment) and
 * put on chain by the relayer (`lowerCap`), whose confirmed `CapLowered` raises `mandate.cap_changed`.
 */
import { randomBytes } from "node:crypto";
import { Context, Effect, Layer, Result, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Hex } from "viem";
import { authorizationAction } from "../chains/authorization-groups.ts";
import { chooseChain, chooseToken, requireRecurringOpen } from "../chains/chain-choice.ts";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { tokenOf } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import type { TokenObject } from "../chains/objects.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { relayerUnavailable, unavailable } from "../chains/unavailable.ts";
import { PublicUrl } from "../config/public-url.ts";
import { type Page, renderPage } from "../db/query.ts";
import { InvalidRequest, invalidParam, type NotFound, type Unavailable } from "../errors.ts";
import { Outbox } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { PageQuery } from "../pagination.ts";
import { MANDATE_STATUSES, type MandateObject, type MandateRow, toMandateObject } from "./mandate-object.ts";
import { MandateStore } from "./mandate-store.ts";

export const DEFAULT_APPROVAL_PERIODS = 12;
export const MAX_APPROVAL_PERIODS = 120;

const Text = (max: number) => Schema.String.check(Schema.isBetweenLength(1, max));

export const ApprovalPeriods = Schema.Int.check(
  Schema.isBetween({ minimum: 1, maximum: MAX_APPROVAL_PERIODS }),
);

export const CreateMandate = Schema.Struct({
  cap_decimal: Schema.String.annotate({
    description: 'Most that may be collected per period, in the token\'s units, e.g. "25.00"',
  }),
  period: Schema.String.annotate({ description: "Billing period: `month` (the only one)" }),
  customer: Text(500).annotate({ description: "Your reference for the customer" }),
  reference: Schema.optionalKey(
    Schema.NullOr(Text(500)).annotate({ description: "Your own reference for this mandate" }),
  ),
  chain: Schema.optionalKey(
    Schema.Int.annotate({
      description:
        "EIP-155 chain id; default: your only configured chain of this mode where subscriptions_available is true",
    }),
  ),
  token: Schema.optionalKey(
    Schema.String.annotate({
      description: "Token symbol or address; default: the only token you accept on the chain",
    }),
  ),
  approval_periods: Schema.optionalKey(
    ApprovalPeriods.annotate({
      description: `Periods one signature covers (approval = cap × approval_periods), 1-${MAX_APPROVAL_PERIODS}, default ${DEFAULT_APPROVAL_PERIODS}`,
    }),
  ),
}).annotate({ identifier: "CreateMandateRequest" });
export type CreateMandate = typeof CreateMandate.Type;

export const UpdateMandate = Schema.Struct({
  cap_decimal: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "A new cap per period. Higher than the cap in force: a pending_update the customer signs at authorization_url (the old cap stays chargeable until then); the cap in force again: cancels a pending raise; lower: in force at once, then on chain (mandate.cap_changed)",
    }),
  ),
  reference: Schema.optionalKey(
    Schema.NullOr(Text(500)).annotate({ description: "Your own reference for this mandate" }),
  ),
}).annotate({ identifier: "UpdateMandateRequest" });
export type UpdateMandate = typeof UpdateMandate.Type;

/** The relayer action of lowering a mandate's cap on chain: one per (signature, new cap). */
export const lowerCapAction = (chainId: number, onchainId: string, nonce: number, cap: bigint) =>
  `lower-cap:${chainId}:${onchainId.toLowerCase()}:${nonce}:${cap}`;

export const ListMandatesQuery = Schema.Struct({
  ...PageQuery.fields,
  customer: Schema.optionalKey(Text(500).annotate({ description: "Only this customer's mandates" })),
  status: Schema.optionalKey(Schema.Literals(MANDATE_STATUSES)),
}).annotate({ identifier: "ListMandatesQuery" });
export type ListMandatesQuery = typeof ListMandatesQuery.Type;

/** What a new mandate asks the customer to sign, in base units, on a chain the merchant configured. */
export interface MandateTerms {
  readonly chain: ResolvedChain;
  readonly token: TokenObject;
  readonly payee: Hex;
  readonly cap: bigint;
  readonly approvalPeriods: number;
  readonly customer: string;
  readonly reference: string | null;
  /** When period 0 starts (chain time); default now. A subscription's trial starts its mandate at its end. */
  readonly anchor?: number;
}

type Failure = InvalidRequest | Unavailable | SqlError.SqlError;

const refuse = (
  code: "mandate_revoked" | "mandate_being_signed" | "mandate_not_chargeable",
  message: string,
) => new InvalidRequest({ code, message, param: null });

export class Mandates extends Context.Service<
  Mandates,
  {
    /** `POST /v1/mandates`: the request checked and turned into terms, then `open`. */
    readonly create: (scope: MerchantScope, input: CreateMandate) => Effect.Effect<MandateObject, Failure>;
    /** Opens a mandate on terms already checked (a subscription opens its own this way). */
    readonly open: (scope: MerchantScope, terms: MandateTerms) => Effect.Effect<MandateRow, Failure>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<MandateObject, NotFound | SqlError.SqlError>;
    /**
     * `POST /v1/mandates/{id}`: a new cap (a raise pending the customer's signature, a lower in force at
     * once and sent on chain, or the cap in force again to cancel a pending raise) and the reference.
     * Inside the caller's transaction: the relayer's transaction is broadcast once it commits.
     */
    readonly update: (
      scope: MerchantScope,
      id: string,
      input: UpdateMandate,
    ) => Effect.Effect<MandateObject, Failure | NotFound>;
    readonly list: (
      scope: MerchantScope,
      query: ListMandatesQuery,
    ) => Effect.Effect<Page<MandateObject>, InvalidRequest | SqlError.SqlError>;
    /** The API object of a record (its link needs the public URL, its amounts the chain's tokens). */
    readonly render: (row: MandateRow) => MandateObject;
  }
>()("Mandates") {
  static readonly layer: Layer.Layer<
    Mandates,
    never,
    | MandateStore
    | ChainRegistry
    | MerchantChains
    | ChainHeads
    | ChainClients
    | Relayer
    | Outbox
    | PublicUrl
    | GasCosts
  > = Layer.effect(
    Mandates,
    Effect.gen(function* () {
      const registry = yield* ChainRegistry;
      const merchantChains = yield* MerchantChains;
      const heads = yield* ChainHeads;
      const relayer = yield* Relayer;
      const { url: publicUrl } = yield* PublicUrl;
      const store = yield* MandateStore;
      const gasCosts = yield* GasCosts;
      const clients = yield* ChainClients;
      const outbox = yield* Outbox;

      const render = (row: MandateRow) => toMandateObject(row, registry.byId(row.chain_id), publicUrl);

      const open = (scope: MerchantScope, terms: MandateTerms) =>
        Effect.gen(function* () {
          yield* requireRecurringOpen(terms.chain, "chain", "");
          const operator = relayer.operator(terms.chain);
          if (!operator) return yield* relayerUnavailable("open mandates");
          // Period 0 starts now, as the chain tells time (a test clock moves it), unless the terms say when.
          const anchor =
            terms.anchor ?? (yield* heads.latestTime(terms.chain).pipe(Effect.mapError(unavailable)));
          return yield* store.insert({
            scope,
            chainId: terms.chain.id,
            token: terms.token.address as Hex,
            cap: terms.cap,
            approvalPeriods: terms.approvalPeriods,
            customer: terms.customer,
            reference: terms.reference,
            payee: terms.payee,
            operator,
            holdSeconds: terms.chain.escrow_available ? terms.chain.hold_seconds : 0,
            anchor,
            salt: BigInt(`0x${randomBytes(12).toString("hex")}`),
          });
        });

      const create = (scope: MerchantScope, input: CreateMandate) =>
        Effect.gen(function* () {
          if (input.period !== "month")
            return yield* invalidParam(
              "period",
              `Unsupported period ${JSON.stringify(input.period.slice(0, 40))}: mandates bill per calendar month; use "month".`,
              "period_unsupported",
            );
          const configured = yield* merchantChains.current(scope);
          const { chain, config } = yield* chooseChain(registry, scope, configured, input.chain);
          yield* requireRecurringOpen(chain, "chain", "");
          const token = yield* chooseToken(config, input.token);
          const cap = parseDecimal(input.cap_decimal, token.decimals, MAX_CAP_UNITS);
          if (Result.isFailure(cap))
            return yield* invalidParam("cap_decimal", `cap_decimal ${cap.failure.message}.`);
          const row = yield* open(scope, {
            chain,
            token,
            payee: config.payout_address as Hex,
            cap: cap.success,
            approvalPeriods: input.approval_periods ?? DEFAULT_APPROVAL_PERIODS,
            customer: input.customer,
            reference: input.reference ?? null,
          });
          return render(row);
        });

      const retrieve = (scope: MerchantScope, id: string) => Effect.map(store.load(scope, id), render);

      /** Puts a lower cap on chain: checked by a simulation first (nothing is sent when it would fail). */
      const sendLowerCap = (chain: ResolvedChain, mandate: MandateRow, cap: bigint) =>
        Effect.gen(function* () {
          const sender = relayer.address(chain.id);
          if (sender === undefined) return yield* relayerUnavailable("lower a cap on chain");
          if (!relayer.actsFor(chain, mandate.operator_address))
            return yield* refuse(
              "mandate_not_chargeable",
              "This mandate names another operator than this service, so the service cannot lower its cap on chain.",
            );
          const args = [mandate.onchain_id, cap];
          const refused = yield* clients
            .simulateOutcome(chain, sender, "lowerCap", args)
            .pipe(Effect.mapError(unavailable));
          if (refused?.errorName === "Revoked")
            return yield* refuse("mandate_revoked", "The customer revoked this mandate on chain.");
          if (refused !== undefined)
            return yield* invalidParam(
              "cap_decimal",
              `The escrow refused to lower the cap (${refused.errorName}); the cap on chain may have changed meanwhile. Retrieve the mandate and try again.`,
            );
          const action = lowerCapAction(
            chain.id,
            mandate.onchain_id ?? "",
            mandate.signature_version ?? 0,
            cap,
          );
          const sent = yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data: escrowCallData("lowerCap", args),
              purpose: `${action}:${yield* newId("request")}`,
              action,
              merchants: [mandate.merchant_id],
            })
            .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
          yield* gasCosts.carries(chain.id, sent.purpose, "cap_lowering", "mandate", [mandate.id]);
        });

      const update = (scope: MerchantScope, id: string, input: UpdateMandate) =>
        Effect.gen(function* () {
          const mandate = yield* store.load(scope, id, { lock: true });
          const reference = input.reference === undefined ? {} : { reference: input.reference };
          if (input.cap_decimal === undefined) return render(yield* store.recordUpdate(id, reference));
          const chain = registry.byId(mandate.chain_id);
          if (!chain) return yield* Effect.die(new Error(`mandate ${id} is on an unknown chain`));
          const decimals = tokenOf(chain, mandate.token_address)?.decimals ?? 0;
          const parsed = parseDecimal(input.cap_decimal, decimals, MAX_CAP_UNITS);
          if (Result.isFailure(parsed))
            return yield* invalidParam("cap_decimal", `cap_decimal ${parsed.failure.message}.`);
          const cap = parsed.success;
          const current = BigInt(mandate.cap);
          if (mandate.status === "revoked")
            return yield* refuse(
              "mandate_revoked",
              "The customer revoked this mandate; its cap cannot change.",
            );
          // Nothing signed yet: the customer will sign the new cap in the first place.
          if (mandate.signature_version === null) {
            const signing =
              mandate.onchain_id === null
                ? undefined
                : yield* relayer.findAction(chain.id, authorizationAction(chain.id, mandate.onchain_id, 1n));
            if (signing?.status === "pending" || signing?.status === "mined")
              return yield* refuse(
                "mandate_being_signed",
                "The customer's signature of this mandate is on its way to the chain. Change the cap once mandate.authorized has arrived.",
              );
            return render(yield* store.recordUpdate(id, { ...reference, cap, pendingCap: null }));
          }
          if (cap === current)
            // The cap in force again: cancels a pending raise.
            return render(yield* store.recordUpdate(id, { ...reference, pendingCap: null }));
          if (cap > current) {
            const unchanged = mandate.pending_cap !== null && BigInt(mandate.pending_cap) === cap;
            const row = unchanged
              ? yield* store.recordUpdate(id, reference)
              : yield* store.recordUpdate(id, { ...reference, pendingCap: cap });
            if (!unchanged)
              yield* outbox.raise({
                merchantId: scope.merchantId,
                livemode: scope.livemode,
                type: "mandate.cap_change_requested",
                object: render(row),
                key: `mandate.cap_change_requested:${id}:${yield* newId("request")}`,
              });
            return render(row);
          }
          yield* sendLowerCap(chain, mandate, cap);
          return render(yield* store.recordUpdate(id, { ...reference, cap, pendingCap: null }));
        });

      const list = (scope: MerchantScope, query: ListMandatesQuery) =>
        Effect.map(store.page(scope, query, query), (page) => renderPage(page, render));

      return { create, open, retrieve, update, list, render };
    }),
  );
}
