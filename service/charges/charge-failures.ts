/**
 * What a simulated or reverted charge means for the merchant. Pure. Refusals are the merchant's
 * mistakes (400, nothing recorded); failures are the customer's situation (a failed charge, an event).
 */
import type { ErrorCode } from "../error-codes.ts";

export type ChargeRevertOutcome =
  | { readonly kind: "refuse"; readonly code: ErrorCode; readonly message: string }
  | {
      readonly kind: "fail";
      readonly failureCode: "insufficient_funds" | "approval_exhausted" | "processing_error";
      readonly message: string;
    };

export const classifyChargeRevert = (errorName: string | undefined): ChargeRevertOutcome => {
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
        message: `The chain refused the charge${errorName ? ` (${errorName})` : ""}.`,
      };
  }
};
