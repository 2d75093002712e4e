/**
 * The x402 specification's reasons (x402-specification-v2.md §9) for this API's refusals of a transfer
 * by authorization. The API's own code and message go along in `invalidMessage` / `errorMessage`.
 */
import type { ErrorCode } from "../error-codes.ts";

export const X402_REASONS = [
  "insufficient_funds",
  "invalid_exact_evm_payload_authorization_valid_after",
  "invalid_exact_evm_payload_authorization_valid_before",
  "invalid_exact_evm_payload_authorization_value_mismatch",
  "invalid_exact_evm_payload_signature",
  "invalid_exact_evm_payload_recipient_mismatch",
  "invalid_network",
  "invalid_payload",
  "invalid_payment_requirements",
  "invalid_scheme",
  "unsupported_scheme",
  "invalid_x402_version",
  "invalid_transaction_state",
  "unexpected_verify_error",
  "unexpected_settle_error",
] as const;
/** The `mandate` scheme's own reasons (ours, docs/x402.md). */
export const MANDATE_REASONS = [
  "invalid_mandate_signature",
  "mandate_usage_expired",
  "mandate_not_billing",
  "mandate_cap_exceeded",
] as const;
export type X402Reason = (typeof X402_REASONS)[number] | (typeof MANDATE_REASONS)[number];

/** Not final: the transaction is sent and not mined yet (x402's later versions; `@x402/core` settles again). */
export const SETTLEMENT_PENDING = "settlement_pending";

const REASONS: Partial<Record<ErrorCode, X402Reason>> = {
  parameter_invalid: "invalid_payload",
  payment_recipient_mismatch: "invalid_exact_evm_payload_recipient_mismatch",
  payment_amount_too_low: "invalid_payment_requirements",
  payment_not_payable: "invalid_payment_requirements",
  gasless_unsupported: "invalid_payment_requirements",
  authorization_expired: "invalid_exact_evm_payload_authorization_valid_before",
  authorization_not_yet_valid: "invalid_exact_evm_payload_authorization_valid_after",
  signature_invalid: "invalid_exact_evm_payload_signature",
  wallet_factory_not_allowed: "invalid_exact_evm_payload_signature",
  wallet_deployment_failed: "invalid_exact_evm_payload_signature",
  payer_balance_insufficient: "insufficient_funds",
  authorization_used: "invalid_transaction_state",
  authorization_failed: "invalid_transaction_state",
};

const MANDATE_REASONS_OF: Partial<Record<ErrorCode, X402Reason>> = {
  signature_invalid: "invalid_mandate_signature",
  parameter_invalid: "invalid_payment_requirements",
  subscription_not_metered: "mandate_not_billing",
  subscription_not_billing: "mandate_not_billing",
  mandate_cap_exceeded: "mandate_cap_exceeded",
};

/** The reason for one of our refusals; a code without one is unexpected in that phase. */
export const reasonOf = (
  code: ErrorCode,
  phase: "verify" | "settle",
  scheme: "exact" | "mandate" = "exact",
): X402Reason =>
  (scheme === "mandate" ? MANDATE_REASONS_OF[code] : REASONS[code]) ??
  (phase === "verify" ? "unexpected_verify_error" : "unexpected_settle_error");
