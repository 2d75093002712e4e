/**
 * Every error `code` the API answers, with its HTTP status and when it happens: the one catalogue. The
 * error classes (errors.ts) take only these codes, so a new one is added here first; docs/errors.md is
 * generated from this list (`npm run docs`) and a test fails when the two differ.
 */

export interface ErrorCodeEntry {
  readonly status: number | readonly number[];
  readonly when: string;
}

export const ERROR_CODES = {
  // The protocol, before any route runs.
  route_not_found: {
    status: 404,
    when: "No route has this method and path (or a test helper asked with a live key).",
  },
  method_not_allowed: {
    status: 405,
    when: "The path exists, not with this method; `Allow` lists the methods.",
  },
  request_malformed: {
    status: 400,
    when: "The HTTP request itself is malformed (a forbidden byte in the URL or a header).",
  },
  headers_too_large: { status: 431, when: "The request line and headers are over 16 KiB." },
  request_timeout: { status: 408, when: "The request took too long to arrive." },
  body_too_large: { status: 413, when: "The body is over 64 KiB." },
  unsupported_media_type: { status: 415, when: "A body sent without `Content-Type: application/json`." },
  invalid_json: { status: 400, when: "The body is not valid JSON." },
  invalid_body: { status: 400, when: "The body is JSON but not an object." },
  parameter_missing: { status: 400, when: "A required parameter is missing (`param` names it)." },
  parameter_unknown: { status: 400, when: "A parameter the operation does not take (`param` names it)." },
  parameter_invalid: {
    status: 400,
    when: "A parameter does not match its rule: type, range, pattern, a NUL or lone surrogate, too long (`param` names it).",
  },
  parameter_conflict: {
    status: 400,
    when: "Parameters that cannot go together, e.g. `starting_after` with `ending_before`.",
  },
  // Keys and idempotency.
  api_key_missing: { status: 401, when: "No `Authorization` header." },
  api_key_malformed: {
    status: 401,
    when: "The header is not `Bearer <key>` with a key starting `sk_test_`, `sk_live_`, `rk_test_` or `rk_live_`.",
  },
  api_key_invalid: { status: 401, when: "No such key, or a revoked one." },
  api_key_restricted: {
    status: 403,
    when: "A restricted key (`rk_…`, read-only) or a console session signed in with one asked to change something: only `GET` is allowed.",
  },
  console_session_invalid: {
    status: 401,
    when: "A console request whose session cookie names no live session (signed out, expired, or its key revoked).",
  },
  console_csrf_invalid: {
    status: 403,
    when: "A console POST without the session's `X-CSRF-Token`, or from another origin.",
  },
  metrics_token_invalid: { status: 401, when: "`GET /metrics` without its token." },
  idempotency_key_missing: { status: 400, when: "A POST without `Idempotency-Key`." },
  idempotency_key_invalid: {
    status: 400,
    when: "`Idempotency-Key` is not 1-255 printable ASCII characters.",
  },
  idempotency_key_reused: { status: 409, when: "The key was used for another method, path or body." },
  resource_missing: {
    status: [404, 400],
    when: "No such object for this key (another merchant's included): 404 for the path's id, 400 for an id in the body.",
  },
  // Chains and tokens.
  chain_unknown: { status: 400, when: "No chain with this id in this mode (see `GET /v1/chains`)." },
  chain_not_configured: {
    status: 400,
    when: "You have no payout address on the chain (`POST /v1/merchant/chains`).",
  },
  chain_closed: {
    status: 400,
    when: "The chain's `subscriptions_available` is false (no new mandates or subscriptions there; existing ones keep billing), or, for a new payment, its `payments_available` is false.",
  },
  token_unknown: { status: 400, when: "You do not accept this token on the chain." },
  payout_address_in_use: { status: 400, when: "Another merchant's payout address on this chain." },
  chain_unavailable: {
    status: 503,
    when: "The chain's RPC did not answer; nothing changed, a retry is safe.",
  },
  relayer_unavailable: {
    status: 503,
    when: "The service has no relayer key, so it cannot send transactions.",
  },
  relayer_budget_exhausted: {
    status: 503,
    when: "The relayer's hourly gas budget on the chain is spent; retry later.",
  },
  relayer_share_exhausted: {
    status: 503,
    when: "The merchant's share of the relayer's hourly gas budget on the chain (`relayer_merchant_share`) is spent; nothing was sent or recorded. `Retry-After` says when it has room; other merchants go on.",
  },
  relayer_balance_low: {
    status: 503,
    when: "The relayer's account on the chain is below its minimum balance (the chain's `gas.min_balance_wei`), so nothing was sent or recorded; retry once the operator has topped it up.",
  },
  token_paused: {
    status: 503,
    when: "The token's issuer has paused it (every transfer of it reverts), so nothing was sent or recorded; the message names the token. Retry once it is unpaused.",
  },
  // Mandates and charges.
  period_unsupported: { status: 400, when: "A `period` other than `month`." },
  mandate_cap_exceeded: { status: 400, when: "The amount is above the mandate's cap (nothing is sent)." },
  period_already_charged: { status: 400, when: "The mandate was already charged in this period." },
  mandate_not_authorized: { status: 400, when: "The customer has not signed the mandate yet." },
  mandate_revoked: { status: 400, when: "The customer revoked the mandate for good." },
  mandate_being_signed: {
    status: 400,
    when: "The mandate's first signature is on its way to the chain; its cap can change once it is recorded.",
  },
  mandate_not_chargeable: { status: 400, when: "The mandate names another operator than this service." },
  mandate_not_started: { status: 400, when: "The mandate's first period has not begun." },
  charge_not_returnable: { status: 400, when: "Only a held charge can be returned, during its hold, once." },
  // One-time payments.
  payment_not_cancelable: {
    status: 400,
    when: "Only a payment to which nothing has arrived (status `requires_payment`) can be canceled.",
  },
  payment_not_returnable: {
    status: 400,
    when: "Only funds of a payment held in escrow can be returned, during their hold, one return at a time.",
  },
  amount_too_small: {
    status: 400,
    when: "A payment's `amount_decimal` is below the token's smallest payment (`min_payment_decimal` in `GET /v1/limits`; 0.01 of the token unless the chain config says otherwise).",
  },
  open_payments_limit_reached: {
    status: 400,
    when: "You have as many open payments (`requires_payment` or `processing`) on the chain as allowed at once (`GET /v1/limits`): cancel those you no longer need, or wait until some are paid or expire.",
  },
  // The hosted authorization page.
  authorization_not_found: { status: 404, when: "The authorization link is not valid." },
  wrong_account: { status: 400, when: "Another wallet is bound to this mandate." },
  nothing_to_sign: { status: 400, when: "The mandate is signed; nothing is left to sign." },
  terms_changed: { status: 400, when: "The signed terms are not the mandate's, or were signed already." },
  terms_expired: { status: 400, when: "The signature's deadline has passed." },
  signature_invalid: {
    status: 400,
    when: "The signature does not match the terms and the wallet (the pay page: the transfer authorization and `from`).",
  },
  authorization_failed: {
    status: 400,
    when: "The escrow would refuse the authorization, or the token the pay page's transfer (the message says why).",
  },
  authorization_limit_reached: {
    status: 429,
    when: "The mandate's authorize transactions, or the payment's gasless transfers, for the day are used up; `Retry-After` says when.",
  },
  authorization_in_flight: {
    status: 429,
    when: "The pay page: another gasless transfer by the same payer in the same token is still on its way to the chain; retry once it is mined (`Retry-After`).",
  },
  payer_cooling_off: {
    status: 429,
    when: "The pay page: a gasless transfer or wallet deployment relayed for this payer reverted within the chain's `gasless_cooling_off_seconds`; none is sent for it until then (`Retry-After`).",
  },
  rate_limited: {
    status: 429,
    when: "Too many requests: to `/v1` with one API key in one class of routes (reads, writes or test helpers; the `RateLimit-*` headers and `GET /v1/limits` show the limit), or to the hosted pages and the console from one address or for one link. `Retry-After` says when to try again.",
  },
  permit_signature_unsupported: {
    status: 400,
    when: "A permit signature longer than 65 bytes (a Safe with several owners): the escrow's permit takes v, r, s. Approve the escrow from the wallet and sign again; with the allowance in place only the terms are asked for.",
  },
  // Smart wallets that sign before they are deployed (ERC-6492), on both hosted pages.
  wallet_factory_not_allowed: {
    status: 400,
    when: "An ERC-6492 signature names a wallet factory the chain does not allow (`wallet_factories`).",
  },
  wallet_deployment_failed: {
    status: 400,
    when: "An ERC-6492 signature's factory call does not deploy a wallet at the signer's address, or its deployment failed on chain.",
  },
  wallet_deployment_pending: {
    status: 503,
    when: "The signer's wallet deployment was sent and is not mined yet; submit the same signatures again shortly.",
  },
  // The hosted pay page.
  payment_page_not_found: { status: 404, when: "The payment link is not valid." },
  // The customer portal.
  portal_session_not_found: { status: 404, when: "The portal link is not valid." },
  portal_feature_disabled: {
    status: 400,
    when: "The portal link does not allow this action (the session's `features`).",
  },
  portal_session_expired: {
    status: 404,
    when: "The portal link has expired (an hour after its session was created): create a new session.",
  },
  payment_not_payable: {
    status: 400,
    when: "The payment is paid, canceled or reversed, no longer watched, or everything due has arrived.",
  },
  gasless_unsupported: {
    status: 400,
    when: "The payment's token has no EIP-3009 `transferWithAuthorization`: pay with a transfer instead.",
  },
  payment_recipient_mismatch: {
    status: 400,
    when: "The authorization's `to` is not the payment's deposit address.",
  },
  payment_amount_too_low: { status: 400, when: "The authorization's `value` is below what is left to pay." },
  authorization_expired: {
    status: 400,
    when: "The authorization's `valid_before` is less than a minute ahead in chain time.",
  },
  authorization_not_yet_valid: {
    status: 400,
    when: "The authorization's `valid_after` has not passed in chain time.",
  },
  authorization_used: { status: 400, when: "The payer already used or canceled the authorization's nonce." },
  payer_balance_insufficient: {
    status: 400,
    when: "The payer's token balance is below the authorization's `value`.",
  },
  // Test mode.
  test_funding_unsupported: { status: 400, when: "The chain's token cannot mint test funds." },
  test_wallet_mismatch: { status: 400, when: "A real wallet signed this mandate; only it can sign again." },
  test_clock_unsupported: { status: 400, when: "The chain is not a local chain this deployment runs." },
  test_payment_unsupported: {
    status: 400,
    when: "Test payments need a local chain this deployment runs, whose token can mint test funds.",
  },
  test_authorization_unsupported: {
    status: 400,
    when: "The token has no permit, so the test wallet would need gas to approve.",
  },
  // Subscriptions.
  price_inactive: { status: 400, when: "The price is deactivated: no new subscriptions." },
  coupon_not_applicable: { status: 400, when: "An amount-off coupon in another token than the price's." },
  cap_too_low: { status: 400, when: "`cap_decimal` is below the first invoice." },
  subscription_canceled: { status: 400, when: "The subscription is already canceled." },
  price_not_applicable: {
    status: 400,
    when: "A plan change to a price in another chain or token than the subscription's mandate.",
  },
  pending_update_missing: {
    status: 400,
    when: "The subscription has no pending or scheduled change to cancel.",
  },
  subscription_not_metered: {
    status: 400,
    when: "Usage for a subscription whose price has no metered part.",
  },
  subscription_not_billing: { status: 400, when: "Usage for an incomplete or canceled subscription." },
  // Webhooks.
  event_type_unknown: {
    status: 400,
    when: "A name in `events` the service does not emit (the message lists them).",
  },
  url_invalid: {
    status: 400,
    when: "Not an absolute http(s) URL, with credentials or a fragment, or over 2,048 characters.",
  },
  url_insecure: {
    status: 400,
    when: "`http` in live mode (a portal's `return_url`: also `http` to anything but a loopback address).",
  },
  url_private: {
    status: 400,
    when: "A refused address, or a name resolving to one (test mode allows loopback and private ones, never metadata or link-local).",
  },
  webhook_endpoint_disabled: { status: 400, when: "Testing or replaying to a disabled endpoint." },
  webhook_endpoint_missing: { status: 400, when: "A replay found no endpoint to send to." },
  // Ours.
  internal_error: {
    status: 500,
    when: "Our fault; the message carries the request id. A retry with the same key is safe.",
  },
} as const satisfies Record<string, ErrorCodeEntry>;

export type ErrorCode = keyof typeof ERROR_CODES;
export const ERROR_CODE_LIST = Object.keys(ERROR_CODES) as ErrorCode[];
