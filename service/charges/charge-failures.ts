/**
 * What a simulated or reverted charge means for the merchant. Pure. Refusals are the merchant's
 * mistakes (400, nothing recorded); failures are a failed charge with an event: the customer's
 * situation, or (`payout_address_blocked`, `token_paused`) a block the customer did not cause.
 */
import type { ErrorCode } from "../error-codes.ts";
import type { FailureCode } from "./charge-object.ts";

export type ChargeRevertOutcome =
  | { readonly kind: "refuse"; readonly code: ErrorCode; readonly message: string }
  | { readonly kind: "fail"; readonly failureCode: FailureCode; readonly message: string };

/** What else is known of a revert: a token's reason string, and whose address the token has blacklisted. */
export interface RevertContext {
  readonly reason?: string;
  readonly paused?: boolean;
  readonly blacklisted?: "customer" | "payee";
}

export const classifyChargeRevert = (
  errorName: string | undefined,
  context: RevertContext = {},
): ChargeRevertOutcome => {
  if (context.paused)
    return {
      kind: "fail",
      failureCode: "token_paused",
      message:
        "The token's issuer paused it before the charge was mined, so nothing moved. Not the customer's doing: charge again once the token is unpaused.",
    };
  if (context.blacklisted === "customer")
    return {
      kind: "fail",
      failureCode: "customer_blocked",
      message:
        "The token's issuer has blacklisted the customer's wallet, so the token cannot be taken from it. Nothing moved; a charge can succeed only once the wallet is cleared.",
    };
  if (context.blacklisted === "payee")
    return {
      kind: "fail",
      failureCode: "payout_address_blocked",
      message:
        "The token's issuer has blacklisted your payout address, so the charge cannot be paid to it. Nothing moved; not the customer's doing. Charges succeed again once the address is cleared.",
    };
  switch (errorName) {
    case "InsufficientBalance":
      return {
        kind: "fail",
        failureCode: "insufficient_funds",
        message: "The customer's wallet holds less than the amount. The customer must top up.",
      };
    case "InsufficientAllowance":
      return {
        kind: "fail",
        failureCode: "insufficient_funds",
        message: "The customer's wallet no longer lets the escrow pull this amount (allowance too low).",
      };
    case "ApprovalExhausted":
      return {
        kind: "fail",
        failureCode: "approval_exhausted",
        message:
          "The customer's approval (cap × approval_periods) is spent. Send the customer to the mandate's authorization_url to sign again.",
      };
    case "CapExceeded":
      return {
        kind: "refuse",
        code: "mandate_cap_exceeded",
        message: "The amount exceeds the mandate's cap.",
      };
    case "PeriodAlreadyCharged":
      return {
        kind: "refuse",
        code: "period_already_charged",
        message: "This mandate was already charged in the current period.",
      };
    case "Revoked":
      return { kind: "refuse", code: "mandate_revoked", message: "The customer revoked this mandate." };
    case "UnknownMandate":
      return {
        kind: "refuse",
        code: "mandate_not_authorized",
        message: "The customer has not signed this mandate yet: send them to its authorization_url.",
      };
    case "MandateNotStarted":
      return {
        kind: "refuse",
        code: "mandate_not_started",
        message: "The mandate's first period has not begun.",
      };
    case "NotOperator":
      return {
        kind: "refuse",
        code: "mandate_not_chargeable",
        message: "This mandate names another operator than this service, so the service cannot charge it.",
      };
    default:
      return {
        kind: "fail",
        failureCode: "processing_error",
        message: `The chain refused the charge${context.reason ? ` (${context.reason})` : errorName ? ` (${errorName})` : ""}.`,
      };
  }
};
