/**
 * The pay page's gasless payment: the payer signs an EIP-3009 `TransferWithAuthorization` of what is
 * left to pay to the deposit address, and the relayer submits `transferWithAuthorization` to the token,
 * paying the gas. The deposit watcher then sees the transfer like any other.
 *
 * Anyone holding the link can post authorizations and the relayer pays for each transaction, so every
 * check that can refuse runs before anything is sent: the payment still takes payments, the recipient
 * and the value, the validity window (chain time), the signature (chains/wallet-signatures.ts: an EOA's
 * recovered locally, a contract wallet's asked of it by ERC-1271, a counterfactual wallet's ERC-6492
 * wrapper simulated), the payer's balance and the nonce (read from the token), and a simulation of the
 * call. Then, under the payment's row lock: one transaction pending or mined per payment at a time (the
 * relayer's `action`), the same authorization twice is the same transaction (its `purpose`), and at most
 * `transactionsPerPaymentPerDay` transactions a day, a deployment of the payer's wallet included. Across
 * payments, per payer (gasless-payers.ts): one gasless transfer in flight per token, the balance check
 * less what its pending ones move, and a cooling-off after one of its transactions reverted. The
 * transaction counts against the payment's merchant's share of the relayer's budget (relayer-shares.ts).
 *
 * The call is the one the token checks the signer's way: an EOA's signature as v, r, s (every EIP-3009
 * token has that form), a contract wallet's as `bytes` (USDC v2.2's overload, which hands the signature
 * to the wallet's ERC-1271 unchanged, whatever its length).
 */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import {
  BaseError,
  decodeErrorResult,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  hashTypedData,
  parseAbi,
  parseSignature,
} from "viem";
import { ChainClients, ChainUnavailable } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { relayerUnavailable, unavailable } from "../chains/unavailable.ts";
import { WalletDeployments, walletDeploymentPurpose } from "../chains/wallet-deployments.ts";
import { type CheckedSignatures, SignatureHex, WalletSignatures } from "../chains/wallet-signatures.ts";
import type { ErrorCode } from "../error-codes.ts";
import { InvalidRequest, RateLimited, type Unavailable } from "../errors.ts";
import { formatDecimal } from "../money/decimal.ts";
import { GaslessPayers, unreserved } from "./gasless-payers.ts";
import { chainOfPayment, gaslessAction, PaySessions } from "./pay-session.ts";
import type { PaymentRow } from "./payment-object.ts";
import { type NewPayment, PaymentStore } from "./payment-store.ts";
import {
  acceptsPayment,
  amountToSend,
  authorizationProblem,
  type TransferAuthorization,
  transferAuthorizationTypedData,
} from "./transfer-authorization.ts";

/** How many gasless transfers the relayer sends for one payment in a day (retries after a revert). */
export const GaslessLimits = Context.Reference<{ readonly transactionsPerPaymentPerDay: number }>(
  "GaslessLimits",
  { defaultValue: () => ({ transactionsPerPaymentPerDay: 5 }) },
);

const pattern = (regex: RegExp, message: string) => Schema.String.check(Schema.isPattern(regex, { message }));
const AddressText = pattern(/^0x[0-9a-fA-F]{40}$/, "must be a 0x-prefixed 20-byte hex address");
const UintText = pattern(/^(0|[1-9]\d{0,77})$/, "must be an unsigned integer in decimal digits");

export const PayAuthorizationRequest = Schema.Struct({
  from: AddressText.annotate({ description: "The payer: the signer, whose tokens move" }),
  to: AddressText.annotate({ description: "The payment's deposit address" }),
  value: UintText.annotate({ description: "Base units; at least what is left to pay" }),
  valid_after: UintText.annotate({ description: "Unix seconds (chain time); 0 for now" }),
  valid_before: UintText.annotate({ description: "Unix seconds (chain time), at least a minute ahead" }),
  nonce: pattern(/^0x[0-9a-fA-F]{64}$/, "must be 32 bytes in hex (0x + 64 hex digits)"),
  signature: SignatureHex.annotate({
    description:
      "The payer's signature: 65 bytes from a key, more from a contract wallet or in an ERC-6492 wrapper",
  }),
}).annotate({ identifier: "PayAuthorizationRequest" });
export type PayAuthorizationRequest = typeof PayAuthorizationRequest.Type;

const MAX_UINT256 = 2n ** 256n - 1n;

/** The relayer's purpose for one authorization: the same authorization twice is the same transaction. */
export const gaslessPurpose = (chainId: number, paymentId: string, from: string, nonce: string) =>
  `${gaslessAction(chainId, paymentId)}:${from.toLowerCase()}:${nonce.toLowerCase()}`;

const tokenAbi = parseAbi([
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  // What a token refuses an authorization with: OpenZeppelin's ERC-20 errors and EIP-3009's as the
  // local test token names them (USDC itself reverts with strings, matched below).
  "error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)",
  "error AuthorizationUsedOrCanceled(address authorizer, bytes32 nonce)",
  "error AuthorizationExpired(uint256 validBefore)",
  "error AuthorizationNotYetValid(uint256 validAfter)",
  "error InvalidAuthorizationSignature()",
]);

const refuse = (code: ErrorCode, message: string, param: string | null = null) =>
  new InvalidRequest({ code, message, param });

const USED_MESSAGE =
  "This authorization's nonce was already used or canceled on the token. Sign a new authorization.";

/** A token's refusal of the simulated call, as one of our codes. */
const refusalOf = (reason: string): InvalidRequest => {
  if (/ERC20InsufficientBalance|exceeds balance|insufficient balance/i.test(reason))
    return refuse(
      "payer_balance_insufficient",
      "The payer's balance is below the authorization's value.",
      "from",
    );
  if (/AuthorizationUsedOrCanceled|used or canceled/i.test(reason))
    return refuse("authorization_used", USED_MESSAGE, "nonce");
  if (/InvalidAuthorizationSignature|invalid signature/i.test(reason))
    return refuse(
      "signature_invalid",
      "The token does not accept this signature for this authorization.",
      "signature",
    );
  if (/AuthorizationExpired|authorization is expired/i.test(reason))
    return refuse("authorization_expired", "The authorization expired. Sign a new one.", "valid_before");
  if (/AuthorizationNotYetValid|not yet valid/i.test(reason))
    return refuse("authorization_not_yet_valid", "The authorization is not valid yet.", "valid_after");
  return refuse("authorization_failed", `The token would refuse this transfer (${reason.slice(0, 200)}).`);
};

/** The revert reason of a failed call: the token's custom error name or its message. */
const revertReason = (error: unknown): string | undefined => {
  if (!(error instanceof BaseError)) return undefined;
  const data = (
    error.walk((e) => typeof (e as { data?: unknown }).data === "string") as { data?: unknown } | null
  )?.data;
  if (typeof data === "string" && data.startsWith("0x") && data.length >= 10) {
    try {
      // viem also decodes Solidity's Error(string) and Panic(uint256), which the ABI's type omits.
      const decoded = decodeErrorResult({ abi: tokenAbi, data: data as Hex }) as {
        readonly errorName: string;
        readonly args?: readonly unknown[];
      };
      return decoded.errorName === "Error" ? String(decoded.args?.[0] ?? "Error") : decoded.errorName;
    } catch {
      return `custom error ${data.slice(0, 10)}`;
    }
  }
  // A revert without data still says so; anything else (a chain that did not answer) is not a revert.
  return /revert/i.test(error.shortMessage) ? error.shortMessage : undefined;
};

const notPayable = (payment: Pick<PaymentRow, "status">): InvalidRequest => {
  switch (payment.status) {
    case "paid":
      return refuse("payment_not_payable", "This payment is already paid; nothing is left to pay.");
    case "canceled":
      return refuse("payment_not_payable", "The merchant canceled this payment. Don't send anything to it.");
    default:
      return refuse(
        "payment_not_payable",
        "This payment was reversed (its funds went back). Ask the merchant before you pay again.",
      );
  }
};

/**
 * What the checks read of a payment: all a payment not yet recorded has too (x402's `payTo` made per
 * request is verified before its payment is made).
 */
export type PayableRow = Pick<
  PaymentRow,
  | "id"
  | "chain_id"
  | "token_address"
  | "status"
  | "watch_until"
  | "deposit_address"
  | "amount"
  | "received"
  | "seen"
>;

/** A payment not recorded yet, as the checks read it. */
export const payableDraft = (payment: NewPayment): PayableRow => ({
  id: `unrecorded:${payment.depositAddress.toLowerCase()}`,
  chain_id: payment.chainId,
  token_address: getAddress(payment.token),
  status: "requires_payment",
  watch_until: payment.watchUntil,
  deposit_address: payment.depositAddress.toLowerCase(),
  amount: payment.amount.toString(),
  received: "0",
  seen: "0",
});

export type GaslessFailure = InvalidRequest | Unavailable | RateLimited | SqlError.SqlError;

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const registry = yield* ChainRegistry;
  const tokenStates = yield* TokenStates;
  const clients = yield* ChainClients;
  const heads = yield* ChainHeads;
  const relayer = yield* Relayer;
  const store = yield* PaymentStore;
  const gasCosts = yield* GasCosts;
  const sessions = yield* PaySessions;
  const limits = yield* GaslessLimits;
  const walletSignatures = yield* WalletSignatures;
  const walletDeployments = yield* WalletDeployments;
  const payers = yield* GaslessPayers;

  const rpc = <A>(chain: ResolvedChain, what: string, f: () => Promise<A>) =>
    clients.rpc(chain, what, f).pipe(Effect.mapError(unavailable));

  /** The chain time of a block (a payer's revert, for its cooling-off). */
  const blockTime = (chain: ResolvedChain) => (blockNumber: bigint) =>
    rpc(chain, "block", () => clients.client(chain).getBlock({ blockNumber })).pipe(
      Effect.map((block) => Number(block.timestamp)),
    );

  /** A payment still open to this payer's money, and what is left to send (read under its lock, too). */
  const checkPayable = (payment: PayableRow, now: number) =>
    Effect.gen(function* () {
      if (!acceptsPayment(payment.status)) return yield* notPayable(payment);
      if (now > payment.watch_until)
        return yield* refuse(
          "payment_not_payable",
          "This payment's deposit address is no longer watched; a transfer would not be seen. Ask the merchant for a new link.",
        );
    });

  /**
   * Reads the token before anything is simulated: the clear answers for the two common refusals, the
   * balance less what the payer's pending gasless transfers in the token move; and the payer's
   * cooling-off after a revert (gasless-payers.ts).
   */
  const checkPayer = (
    chain: ResolvedChain,
    payment: PayableRow,
    authorization: TransferAuthorization,
    now: number,
  ) =>
    Effect.gen(function* () {
      const token = payment.token_address as Hex;
      const held = yield* payers.standing(chain.id, token, authorization.from, payment.id);
      yield* payers.requireNotCoolingOff(chain, authorization.from, held, now, blockTime(chain));
      const client = clients.client(chain);
      const [balance, used] = yield* Effect.all(
        [
          rpc(chain, "balance", () =>
            client.readContract({
              address: token,
              abi: erc20Abi,
              functionName: "balanceOf",
              args: [authorization.from],
            }),
          ),
          rpc(chain, "authorization state", () =>
            client.readContract({
              address: token,
              abi: tokenAbi,
              functionName: "authorizationState",
              args: [authorization.from, authorization.nonce],
            }),
          ),
        ],
        { concurrency: 2 },
      );
      if (used) return yield* refuse("authorization_used", USED_MESSAGE, "nonce");
      if (unreserved(balance, held.reserved) < authorization.value) {
        const decimals = tokenOf(chain, token)?.decimals ?? 0;
        const symbol = tokenOf(chain, token)?.symbol ?? "tokens";
        if (balance >= authorization.value) yield* payers.refusedReserved(chain);
        return yield* refuse(
          "payer_balance_insufficient",
          `The wallet ${authorization.from} holds ${formatDecimal(balance, decimals)} ${symbol}${held.reserved > 0n ? `, of which ${formatDecimal(held.reserved, decimals)} ${symbol} are on their way to the chain in gasless transfers` : ""}; the authorization moves ${formatDecimal(authorization.value, decimals)} ${symbol}.`,
          "from",
        );
      }
    });

  /** The relayer's call, simulated: the token's own refusal, mapped to our codes. */
  const simulate = (chain: ResolvedChain, token: Hex, data: Hex) =>
    Effect.gen(function* () {
      const from = relayer.address(chain.id);
      if (from === undefined) return yield* relayerUnavailable("send gasless payments");
      const outcome = yield* Effect.tryPromise({
        try: () => clients.client(chain).call({ account: from, to: token, data, blockTag: "pending" }),
        catch: (error) => error,
      }).pipe(
        Effect.as(undefined),
        Effect.catch((error) => {
          const reason = revertReason(error);
          if (reason !== undefined) return Effect.succeed(reason);
          const message = `simulation: ${String(error).split("\n")[0] ?? "no answer"}`;
          return Effect.fail(unavailable(new ChainUnavailable({ chainId: chain.id, message })));
        }),
      );
      if (outcome !== undefined) return yield* refusalOf(outcome);
    });

  /** The authorization as the token reads it, and the relayer's purpose and action for it. */
  const parse = (payment: PayableRow, input: PayAuthorizationRequest) =>
    Effect.gen(function* () {
      const chain = yield* chainOfPayment(registry, payment);
      const action = gaslessAction(chain.id, payment.id);
      const authorization: TransferAuthorization = {
        from: getAddress(input.from),
        to: getAddress(input.to),
        value: BigInt(input.value),
        validAfter: BigInt(input.valid_after),
        validBefore: BigInt(input.valid_before),
        nonce: input.nonce.toLowerCase() as Hex,
      };
      for (const [param, value] of [
        ["value", authorization.value],
        ["valid_after", authorization.validAfter],
        ["valid_before", authorization.validBefore],
      ] as const)
        if (value > MAX_UINT256)
          return yield* refuse("parameter_invalid", `${param} must fit in 256 bits.`, param);
      const purpose = gaslessPurpose(chain.id, payment.id, authorization.from, authorization.nonce);
      return { chain, token: payment.token_address as Hex, action, authorization, purpose };
    });

  /**
   * Every check made before the relayer is asked: the token, the payment, the authorization against it
   * (chain time), the signature and the payer.
   */
  const check = (
    payment: PayableRow,
    { chain, token, authorization }: Effect.Success<ReturnType<typeof parse>>,
    signature: Hex,
  ) =>
    Effect.gen(function* () {
      yield* tokenStates.guard(chain, token);
      const domain = yield* sessions.gaslessDomain(chain, token);
      if (domain._tag === "None")
        return yield* refuse(
          "gasless_unsupported",
          "This payment's token has no transfer by authorization (EIP-3009); send it with a transfer from your wallet.",
        );
      const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
      yield* checkPayable(payment, now);
      const problemWith = (row: PayableRow) => {
        const decimals = tokenOf(chain, token)?.decimals ?? 0;
        return authorizationProblem(
          authorization,
          {
            depositAddress: getAddress(row.deposit_address),
            toSend: amountToSend(row),
            decimalsText: (units) => formatDecimal(units, decimals),
            symbol: tokenOf(chain, token)?.symbol ?? "",
          },
          now,
        );
      };
      const problem = problemWith(payment);
      if (problem) return yield* refuse(problem.code, problem.message, problem.param);

      const signed = yield* walletSignatures.verify(chain, authorization.from, [
        {
          hash: hashTypedData(transferAuthorizationTypedData(domain.value, authorization)),
          signature,
          param: "signature",
          what: "this authorization (EIP-712 TransferWithAuthorization in the token's domain)",
        },
      ]);
      yield* checkPayer(chain, payment, authorization, now);
      return { now, problemWith, signed };
    });

  /** The token call the relayer sends: a key's signature as v, r, s, a contract wallet's as bytes. */
  const callData = (authorization: TransferAuthorization, signed: CheckedSignatures) => {
    const signature = signed.signatures[0] as Hex;
    const { from, to, value, validAfter, validBefore, nonce } = authorization;
    if (signed.contract)
      return encodeFunctionData({
        abi: tokenAbi,
        functionName: "transferWithAuthorization",
        args: [from, to, value, validAfter, validBefore, nonce, signature],
      });
    const { r, s, v, yParity } = parseSignature(signature);
    return encodeFunctionData({
      abi: tokenAbi,
      functionName: "transferWithAuthorization",
      args: [from, to, value, validAfter, validBefore, nonce, Number(v ?? BigInt(yParity + 27)), r, s],
    });
  };

  /**
   * Everything `submit` checks, without sending anything (an x402 facilitator's verify): the payer, or a
   * refusal. The same authorization already sent is refused here (its nonce is used or in flight); a
   * counterfactual wallet's transfer cannot be simulated before the wallet exists, its signature was.
   */
  const verify = (payment: PayableRow, input: PayAuthorizationRequest) =>
    Effect.gen(function* () {
      const parsed = yield* parse(payment, input);
      const { signed } = yield* check(payment, parsed, input.signature as Hex);
      if (signed.deployment === null)
        yield* simulate(parsed.chain, parsed.token, callData(parsed.authorization, signed));
      return parsed.authorization.from;
    });

  /** Checks and submits a signed authorization for the payment; the relayer's transaction, or a refusal. */
  const submit = (payment: PaymentRow, input: PayAuthorizationRequest) =>
    Effect.gen(function* () {
      const parsed = yield* parse(payment, input);
      const { chain, token, action, authorization, purpose } = parsed;
      // The same authorization again (a double click, a retry): its transaction, sending nothing.
      const earlier = yield* relayer.find(chain.id, purpose);
      if (earlier) return earlier;
      const { now, problemWith, signed } = yield* check(payment, parsed, input.signature as Hex);
      /**
       * Under the payment's row lock: one decision per payment at a time, on its current amounts, and the
       * day's limit, unless a transfer already on its way answers the submission (`transfer`: sends nothing).
       * Then under the payer's lock (chain, token, payer): none of its gasless transfers in the token in
       * flight, and no cooling-off (gasless-payers.ts); the relayer's simulation runs under it too.
       */
      const admit = (what: "transfer" | "deployment") =>
        Effect.gen(function* () {
          const locked = yield* store.lock(payment.id);
          yield* checkPayable(locked, now);
          const again = problemWith(locked);
          if (again) return yield* refuse(again.code, again.message, again.param);
          if (what === "transfer") {
            const live = yield* relayer.findAction(chain.id, action);
            if (live && (live.status === "pending" || live.status === "mined")) return;
          }
          yield* payers.lock(chain.id, token, authorization.from);
          const held = yield* payers.standing(chain.id, token, authorization.from, payment.id);
          yield* payers.requireNotCoolingOff(chain, authorization.from, held, now, blockTime(chain));
          yield* payers.requireNoneInFlight(chain, authorization.from, held);
          const recent = yield* relayer.recentActions(chain.id, action, "1 day");
          if (recent.count >= limits.transactionsPerPaymentPerDay)
            return yield* new RateLimited({
              code: "authorization_limit_reached",
              message: `This payment's gasless transfers were sent to the chain ${limits.transactionsPerPaymentPerDay} times in the last day, the most allowed. Pay with a transfer from your wallet, or try again later.`,
              retryAfterSeconds: recent.retryAfterSeconds,
            });
          if (what === "deployment")
            yield* payers.record({
              chainId: chain.id,
              purpose: walletDeploymentPurpose(chain.id, authorization.from),
              kind: "wallet_deployment",
              token,
              payer: authorization.from,
              value: 0n,
              paymentId: payment.id,
            });
        });
      // A counterfactual wallet (ERC-6492) is deployed first; the transfer is then simulated against it.
      if (signed.deployment !== null)
        yield* walletDeployments.deploy(chain, {
          address: authorization.from,
          deployment: signed.deployment,
          action: `${action}:wallet:${authorization.from.toLowerCase()}`,
          source: { object: "payment", id: payment.id },
          merchantId: payment.merchant_id,
          admit: admit("deployment"),
        });
      const data = callData(authorization, signed);
      yield* simulate(chain, token, data);

      return yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* admit("transfer");
          const sent = yield* relayer
            .submit(chain.id, { to: token, data, purpose, action, merchants: [payment.merchant_id] })
            .pipe(
              Effect.catchTag("RelayerError", (error) =>
                Effect.fail(
                  error.reason === "simulation_failed"
                    ? refuse(
                        "authorization_failed",
                        `The token would refuse this transfer (${error.message.slice(0, 200)}).`,
                      )
                    : unavailable(error),
                ),
              ),
            );
          yield* gasCosts.carries(chain.id, purpose, "gasless_transfer", "payment", [payment.id]);
          // Sent now (not an attempt of this payment's already on its way): the payer has it in flight.
          if (sent.purpose === purpose)
            yield* payers.record({
              chainId: chain.id,
              purpose,
              kind: "transfer",
              token,
              payer: authorization.from,
              value: authorization.value,
              paymentId: payment.id,
            });
          return sent;
        }),
      );
    });

  return { verify, submit };
});

export class GaslessPayments extends Context.Service<GaslessPayments>()("GaslessPayments", { make }) {
  static readonly layer = Layer.effect(GaslessPayments, make);
}
