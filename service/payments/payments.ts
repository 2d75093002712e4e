/**
 * One-time payments as merchants create and read them: a deposit address per payment (a plain ERC-20
 * transfer pays it), cancellation before anything arrived, and the return of held funds during their
 * hold. Chain facts move the amounts (payment-facts.ts); the watcher, sweeper and expiry workers do the
 * rest. Records are written by payment-store.ts.
 */
import { randomBytes } from "node:crypto";
import { Clock, Context, Effect, Layer, Result, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { erc20Abi, getAddress, type Hex, isAddress } from "viem";
import { PAYMENT_STATUSES } from "../../src/ledger/payment-machine.ts";
import { chooseChain, chooseToken, requirePaymentsOpen } from "../chains/chain-choice.ts";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { minPaymentUnits, type ResolvedChain, tokenOf } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import type { MerchantChainObject, TokenObject } from "../chains/objects.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { relayerUnavailable, unavailable } from "../chains/unavailable.ts";
import type { Page } from "../db/query.ts";
import { type InvalidRequest, invalidParam, type NotFound, type Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal, MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { PageQuery } from "../pagination.ts";
import { depositAddress } from "./deposit-address.ts";
import { depositTermsOf, paymentReturnAction } from "./deposit-terms.ts";
import { RESCAN_BLOCKS } from "./deposit-watcher.ts";
import { OpenPayments } from "./open-payments.ts";
import type { PaymentObject, PaymentRow } from "./payment-object.ts";
import { PaymentRender } from "./payment-render.ts";
import { type NewPayment, PaymentStore } from "./payment-store.ts";
import { PaymentTransitions } from "./payment-transitions.ts";

/** A payment's deposit address is watched this long after it expires (late payments, top-ups). */
export const LATE_PAYMENT_WINDOW_SECONDS = 7 * 86_400;
export const DEFAULT_EXPIRES_IN = 3_600;
export const MIN_EXPIRES_IN = 60;
export const MAX_EXPIRES_IN = 7 * 86_400;

const Text = (max: number) => Schema.String.check(Schema.isBetweenLength(1, max));

export const CreatePayment = Schema.Struct({
  amount_decimal: Schema.String.annotate({
    description: 'The amount due in the token\'s units, e.g. "49.90"',
  }),
  chain: Schema.optionalKey(
    Schema.Int.annotate({
      description:
        "EIP-155 chain id; default: your only configured chain of this mode where payments_available is true",
    }),
  ),
  token: Schema.optionalKey(
    Schema.String.annotate({
      description: "Token symbol or address; default: the only token you accept on the chain",
    }),
  ),
  reference: Schema.optionalKey(
    Schema.NullOr(Text(500)).annotate({
      description: "Your own reference (an order id); lists filter by it",
    }),
  ),
  description: Schema.optionalKey(
    Schema.NullOr(Text(500)).annotate({ description: "Shown to the payer on the pay page" }),
  ),
  expires_in: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: MIN_EXPIRES_IN, maximum: MAX_EXPIRES_IN })).annotate({
      description: `Seconds until the payment expires (chain time), ${MIN_EXPIRES_IN}-${MAX_EXPIRES_IN}, default ${DEFAULT_EXPIRES_IN}`,
    }),
  ),
}).annotate({ identifier: "CreatePaymentRequest" });
export type CreatePayment = typeof CreatePayment.Type;

export const ListPaymentsQuery = Schema.Struct({
  ...PageQuery.fields,
  status: Schema.optionalKey(Schema.Literals(PAYMENT_STATUSES)),
  reference: Schema.optionalKey(Text(500).annotate({ description: "Only payments with this reference" })),
}).annotate({ identifier: "ListPaymentsQuery" });
export type ListPaymentsQuery = typeof ListPaymentsQuery.Type;

export const ReturnPayment = Schema.Struct({
  address: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "Where the funds go back to; default: the address of the payer's transfer (the largest, when several sent)",
    }),
  ),
}).annotate({ identifier: "ReturnPaymentRequest" });
export type ReturnPayment = typeof ReturnPayment.Type;

/** The terms of the merchant's payments on a chain, but for the payment's id and token. */
export interface DepositParameters {
  readonly escrow: Hex;
  readonly payee: Hex;
  readonly operator: Hex;
  readonly holdSeconds: bigint;
}

export interface DepositPaymentInput {
  readonly token: string;
  readonly paymentId: Hex;
  readonly depositAddress: string;
  readonly amount: bigint;
  readonly description: string | null;
}

type Failure = InvalidRequest | NotFound | Unavailable | SqlError.SqlError;

const notReturnable = (message: string) => invalidParam("id", message, "payment_not_returnable");

export class Payments extends Context.Service<
  Payments,
  {
    readonly create: (scope: MerchantScope, input: CreatePayment) => Effect.Effect<PaymentObject, Failure>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<PaymentObject, NotFound | SqlError.SqlError>;
    readonly list: (
      scope: MerchantScope,
      query: ListPaymentsQuery,
    ) => Effect.Effect<Page<PaymentObject>, InvalidRequest | SqlError.SqlError>;
    readonly cancel: (scope: MerchantScope, id: string) => Effect.Effect<PaymentObject, Failure>;
    readonly returnPayment: (
      scope: MerchantScope,
      id: string,
      input: ReturnPayment,
    ) => Effect.Effect<PaymentObject, Failure>;
    /** What the merchant's payments on the chain are bound to, but for their id and token; none without a relayer. */
    readonly depositParameters: (
      scope: MerchantScope,
      chain: ResolvedChain,
    ) => Effect.Effect<DepositParameters | undefined, SqlError.SqlError>;
    /** The payment `openAtDeposit` would make, with all its checks, unrecorded. */
    readonly draftAtDeposit: (
      scope: MerchantScope,
      chain: ResolvedChain,
      input: DepositPaymentInput,
    ) => Effect.Effect<NewPayment | undefined, Failure>;
    /**
     * A payment whose escrow id the merchant's resource server chose, made once (x402's per-request `payTo`): the payment at
     * `depositAddress` if those terms give it, else undefined (another id, payee, operator or hold).
     */
    readonly openAtDeposit: (
      scope: MerchantScope,
      chain: ResolvedChain,
      input: DepositPaymentInput,
    ) => Effect.Effect<PaymentRow | undefined, Failure>;
    /**
     * The same payment, when its money is at the deposit address already (its authorization reached the
     * token before its settle): recorded if the address holds the amount, made RESCAN_BLOCKS blocks back so
     * that the deposit watcher reads that transfer. Undefined: nothing there, or not those terms.
     */
    readonly openArrived: (
      scope: MerchantScope,
      chain: ResolvedChain,
      input: DepositPaymentInput,
    ) => Effect.Effect<PaymentRow | undefined, Failure>;
  }
>()("Payments") {
  static readonly layer = Layer.effect(
    Payments,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const registry = yield* ChainRegistry;
      const tokenStates = yield* TokenStates;
      const merchantChains = yield* MerchantChains;
      const clients = yield* ChainClients;
      const heads = yield* ChainHeads;
      const relayer = yield* Relayer;
      const store = yield* PaymentStore;
      const gasCosts = yield* GasCosts;
      const renderer = yield* PaymentRender;
      const transitions = yield* PaymentTransitions;
      const openPayments = yield* OpenPayments;

      /** What the merchant's payments opened now on the chain are bound to, but for their id and token. */
      const boundBy = (config: MerchantChainObject, chain: ResolvedChain): DepositParameters | undefined => {
        const operator = relayer.operator(chain);
        return operator === undefined
          ? undefined
          : {
              escrow: getAddress(chain.escrow.address),
              payee: getAddress(config.payout_address),
              operator,
              holdSeconds: BigInt(chain.escrow_available ? chain.hold_seconds : 0),
            };
      };
      const parametersOf = (config: MerchantChainObject, chain: ResolvedChain) => {
        const bound = boundBy(config, chain);
        return bound === undefined ? Effect.fail(relayerUnavailable("take payments")) : Effect.succeed(bound);
      };

      /** A new payment's terms and record, on the chain's time (a test clock moves it). */
      const newPayment = (
        scope: MerchantScope,
        chain: ResolvedChain,
        config: MerchantChainObject,
        token: TokenObject,
        fields: {
          readonly paymentId: Hex;
          readonly amount: bigint;
          readonly reference: string | null;
          readonly description: string | null;
          readonly expiresIn: number;
          /** Blocks before the head the watcher reads its transfers from (money that may be there already). */
          readonly lookbackBlocks?: bigint;
        },
      ) =>
        Effect.gen(function* () {
          const minimum = minPaymentUnits(tokenOf(chain, token.address) ?? token);
          if (fields.amount < minimum)
            return yield* invalidParam(
              "amount_decimal",
              `amount_decimal must be at least ${formatDecimal(minimum, token.decimals)} ${token.symbol}, the smallest payment in this token (GET /v1/limits).`,
              "amount_too_small",
            );
          const { escrow, ...bound } = yield* parametersOf(config, chain);
          const head = yield* heads.latestBlock(chain).pipe(Effect.mapError(unavailable));
          const terms = { paymentId: fields.paymentId, ...bound, token: getAddress(token.address) };
          const expiresAt = head.timestamp + fields.expiresIn;
          return {
            scope,
            chainId: chain.id,
            token: terms.token,
            payee: terms.payee,
            operator: terms.operator,
            holdSeconds: Number(terms.holdSeconds),
            onchainId: terms.paymentId,
            depositAddress: depositAddress(escrow, terms),
            amount: fields.amount,
            reference: fields.reference,
            description: fields.description,
            expiresAt,
            watchUntil: expiresAt + LATE_PAYMENT_WINDOW_SECONDS,
            createdBlock:
              head.number > (fields.lookbackBlocks ?? 0n) ? head.number - (fields.lookbackBlocks ?? 0n) : 0n,
          } satisfies NewPayment;
        });

      /** The merchant's open payments on the chain stay counted (locked) until the payment is in. */
      const admitted = <A, E, R>(
        scope: MerchantScope,
        chain: ResolvedChain,
        insert: Effect.Effect<A, E, R>,
      ) => sql.withTransaction(Effect.andThen(openPayments.admit(scope, chain), insert));

      const create = (scope: MerchantScope, input: CreatePayment) =>
        Effect.gen(function* () {
          const configured = yield* merchantChains.current(scope);
          const { chain, config } = yield* chooseChain(registry, scope, configured, input.chain, "payments");
          yield* requirePaymentsOpen(chain, "chain");
          const token = yield* chooseToken(config, input.token);
          const amount = parseDecimal(input.amount_decimal, token.decimals, MAX_CAP_UNITS);
          if (Result.isFailure(amount))
            return yield* invalidParam("amount_decimal", `amount_decimal ${amount.failure.message}.`);
          const payment = yield* newPayment(scope, chain, config, token, {
            paymentId: `0x${randomBytes(32).toString("hex")}` as Hex,
            amount: amount.success,
            reference: input.reference ?? null,
            description: input.description ?? null,
            expiresIn: input.expires_in ?? DEFAULT_EXPIRES_IN,
          });
          return yield* renderer.render(yield* admitted(scope, chain, store.insert(payment)));
        });

      const configOf = (scope: MerchantScope, chain: ResolvedChain) =>
        Effect.map(merchantChains.current(scope), (configured) =>
          configured.find((c) => c.chain === chain.id),
        );

      const depositParameters = (scope: MerchantScope, chain: ResolvedChain) =>
        Effect.map(configOf(scope, chain), (config) =>
          config === undefined ? undefined : boundBy(config, chain),
        );

      const draftAtDeposit = (
        scope: MerchantScope,
        chain: ResolvedChain,
        input: DepositPaymentInput,
        lookbackBlocks = 0n,
      ) =>
        Effect.gen(function* () {
          yield* requirePaymentsOpen(chain, "chain");
          const config = yield* configOf(scope, chain);
          if (config === undefined)
            return yield* invalidParam("chain", `Chain ${chain.id} is not one of your configured chains.`);
          const token = yield* chooseToken(config, input.token);
          const payment = yield* newPayment(scope, chain, config, token, {
            paymentId: input.paymentId,
            amount: input.amount,
            reference: null,
            description: input.description,
            expiresIn: DEFAULT_EXPIRES_IN,
            lookbackBlocks,
          });
          return payment.depositAddress === input.depositAddress.toLowerCase() ? payment : undefined;
        });

      const openAtDeposit = (
        scope: MerchantScope,
        chain: ResolvedChain,
        input: DepositPaymentInput,
        lookbackBlocks = 0n,
      ) =>
        Effect.gen(function* () {
          const payment = yield* draftAtDeposit(scope, chain, input, lookbackBlocks);
          return payment === undefined
            ? undefined
            : yield* admitted(scope, chain, store.insertAtDeposit(payment));
        });

      const openArrived = (scope: MerchantScope, chain: ResolvedChain, input: DepositPaymentInput) =>
        Effect.gen(function* () {
          const held = yield* clients
            .rpc(chain, "deposit balance", () =>
              clients.client(chain).readContract({
                address: getAddress(input.token),
                abi: erc20Abi,
                functionName: "balanceOf",
                args: [getAddress(input.depositAddress)],
              }),
            )
            .pipe(Effect.mapError(unavailable));
          // The whole amount, not dust: a recorded payment counts toward the merchant's open payments.
          return held < input.amount ? undefined : yield* openAtDeposit(scope, chain, input, RESCAN_BLOCKS);
        });

      const retrieve = (scope: MerchantScope, id: string) =>
        Effect.flatMap(store.load(scope, id), renderer.render);

      const list = (scope: MerchantScope, query: ListPaymentsQuery) =>
        Effect.gen(function* () {
          const page = yield* store.page(scope, query, query);
          return { ...page, data: yield* renderer.renderMany(page.data) };
        });

      const cancel = (scope: MerchantScope, id: string) =>
        sql.withTransaction(
          Effect.gen(function* () {
            const row = yield* store.load(scope, id, { lock: true });
            const now = Math.floor((yield* Clock.currentTimeMillis) / 1000);
            const stepped = yield* transitions.step(row, { kind: "cancel" }, { now });
            if (!stepped.ok)
              return yield* invalidParam(
                "id",
                row.status === "canceled"
                  ? "This payment is already canceled."
                  : `Only a payment to which nothing has arrived can be canceled; this one is ${row.status}.`,
                "payment_not_cancelable",
              );
            return yield* renderer.render(yield* store.reload(id));
          }),
        );

      const returnPayment = (scope: MerchantScope, id: string, input: ReturnPayment) =>
        Effect.gen(function* () {
          if (input.address !== undefined && !isAddress(input.address, { strict: false }))
            return yield* invalidParam("address", "address must be a 0x-prefixed 20-byte hex address.");
          // Locked until the request's transaction ends, as a charge's return is: a concurrent return
          // waits and then finds this one under way, and a fact applied meanwhile is seen whole.
          const row = yield* store.load(scope, id, { lock: true });
          const chain = registry.byId(row.chain_id);
          if (!chain) return yield* Effect.die(new Error(`payment ${id} is on an unknown chain`));
          yield* tokenStates.guard(chain, row.token_address);
          if (BigInt(row.held) === 0n)
            return yield* notReturnable(
              row.hold_seconds === 0
                ? "This payment was paid straight to you (no escrow hold), so the escrow cannot return it."
                : "Nothing of this payment is held in escrow now (nothing confirmed yet, or it was released or returned).",
            );
          if (row.pending_action !== null)
            return yield* notReturnable(
              `A ${row.pending_action} of this payment's funds is already under way.`,
            );
          const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
          if (row.release_at !== null && now >= row.release_at)
            return yield* notReturnable("The hold has ended; the funds are being released to you.");
          // As for a mandate's charge: terms made under a former operator can be returned only by the
          // payee itself (the escrow would refuse the relayer: NotOperator). Sweeps and releases need
          // no operator, so the workers still move such a payment's funds.
          if (!relayer.actsFor(chain, row.operator_address))
            return yield* notReturnable(
              "This payment names another operator than this service, so the service cannot return it; your payout address can call the escrow's returnPayment itself.",
            );
          const payer = yield* payerOf(row.id);
          const to = input.address ?? payer;
          if (to === undefined)
            return yield* invalidParam(
              "address",
              "No payer's transfer is on record for this payment: say where the funds go back to with `address`.",
              "parameter_missing",
            );
          const args = [depositTermsOf(row), getAddress(to)] as const;
          const refused = yield* clients
            .simulateOutcome(
              chain,
              relayer.address(chain.id) ?? (row.operator_address as Hex),
              "returnPayment",
              args,
            )
            .pipe(Effect.mapError(unavailable));
          if (refused !== undefined)
            return yield* notReturnable(
              `The escrow refused the return (${refused.reason ?? refused.errorName}).`,
            );
          const action = paymentReturnAction(chain.id, row.id, yield* store.returnsRecorded(row.id));
          const sent = yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data: escrowCallData("returnPayment", args),
              purpose: `${action}:${yield* newId("request")}`,
              action,
              merchants: [row.merchant_id],
            })
            .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
          yield* store.startAction(row.id, "return", sent.purpose, getAddress(to));
          yield* gasCosts.carries(chain.id, sent.purpose, "payment_return", "payment", [row.id]);
          return yield* renderer.render(yield* store.reload(row.id));
        });

      /** The sender of the payment's largest transfer (its payer), if the watcher saw one. */
      const payerOf = (id: string) =>
        Effect.map(store.transfersOf([id]), (transfers) => {
          const largest = [...transfers].sort((a, b) => (BigInt(b.amount) > BigInt(a.amount) ? 1 : -1))[0];
          return largest?.from_address;
        });

      return {
        create,
        retrieve,
        list,
        cancel,
        returnPayment,
        depositParameters,
        draftAtDeposit,
        openAtDeposit,
        openArrived,
      };
    }),
  );
}
