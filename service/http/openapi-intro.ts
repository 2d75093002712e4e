/**
 * The OpenAPI document's `info.description`: the conventions every operation shares, in Markdown (the
 * reference at /docs renders it), and the whole error-code catalogue.
 */
import { ERROR_CODES, type ErrorCodeEntry } from "../error-codes.ts";

const statusText = (status: ErrorCodeEntry["status"]) =>
  typeof status === "number" ? String(status) : status.join(" or ");

/** One line per code (a list reads better than a table in the reference's narrow text column). */
export const errorCodeList = (): string =>
  Object.entries(ERROR_CODES)
    .map(
      ([code, entry]: [string, ErrorCodeEntry]) =>
        `- \`${code}\` · **${statusText(entry.status)}**: ${entry.when.replace(/\n/g, " ")}`,
    )
    .join("\n");

export const apiIntroduction =
  (): string => `Mandates, charges, subscriptions, one-time payments and signed webhook events on our escrow contract. Every object has \`livemode\`; every POST needs \`Idempotency-Key\`. The machine-readable document is [/v1/openapi.json](v1/openapi.json); the repository's docs/api-conventions.md has the details.

## Authentication

Send your secret key as a Bearer token on every \`/v1\` request:

\`\`\`http
Authorization: Bearer sk_test_…
\`\`\`

\`sk_test_…\` keys see test mode (test chains, \`livemode: false\`), \`sk_live_…\` keys live mode; a key never sees the other mode's objects. A missing, malformed, unknown or revoked key gets 401. Restricted keys (\`rk_test_…\`, \`rk_live_…\`) read everything and change nothing: every POST and DELETE with one gets 403 \`api_key_restricted\`. Keys are made with the operator CLI (docs/operations.md, *Merchants and API keys*).

## Idempotency

Every POST needs an \`Idempotency-Key\` header: 1-255 printable ASCII characters, a UUID is a good choice. The first answer (status and body) is kept for 24 hours and replayed for a retry with the same key, with \`Idempotent-Replayed: true\`; the same key with another method, path or body is 409 \`idempotency_key_reused\`. Retrying after a timeout or a 5xx with the same key is always safe. The exception is the x402 facilitator's \`POST /x402/verify\` and \`/x402/settle\`: they need no key, because x402's clients send none. Verify changes nothing, and settle is idempotent by the payment's own nonce.

## Errors

Every error has one shape, with a 4xx for anything the caller did:

\`\`\`json
{"error":{"type":"invalid_request_error","code":"parameter_invalid","message":"Invalid payout_address: …","param":"payout_address"}}
\`\`\`

\`type\` is \`invalid_request_error\`, \`authentication_error\`, \`idempotency_error\` or \`api_error\` (ours); \`code\` is one of the [error codes](#description/error-codes) below; \`param\` names the parameter at fault, or is \`null\`. Every operation shows its error responses with examples.

## Pagination

Lists are \`{"object":"list","data":[…],"has_more":…}\`, newest first. \`limit\` is 1-100 (default 10); \`starting_after\` (the last id of the previous page) pages to older objects, \`ending_before\` (the first id of the current page) to newer ones; not both.

## Money

Amounts are exact: base-unit integer strings (\`cap\`, \`amount\`) with a decimal twin in the token's units (\`cap_decimal\`, \`amount_decimal\`). Decimals you send are digits with an optional point and at most the token's decimals.

## Limits

Each API key has a rate per class of routes: reads (GET), writes (POST, DELETE) and test helpers, by default 100 requests a second each for a live key, 25 for a test key and 10 test helpers, in bursts of at most one second's worth. Every authenticated answer carries the class's \`RateLimit-Limit\`, \`RateLimit-Remaining\`, \`RateLimit-Reset\` and \`RateLimit-Policy\` (draft-ietf-httpapi-ratelimit-headers-06); beyond the rate the answer is 429 \`rate_limited\` with \`Retry-After\`. A merchant may have 10,000 payments open at once per chain (400 \`open_payments_limit_reached\` beyond), and a payment must be at least its token's smallest amount (400 \`amount_too_small\`). \`GET /v1/limits\` shows every limit for your key.

## Webhooks

Each delivery is a POST of the event's JSON with the header \`X-Service-Signature: t=<unix seconds>,v1=<hex>\`: the HMAC-SHA256, keyed with the endpoint's \`whsec_…\` secret, of \`<t>.\` followed by the raw body. Recompute it over the bytes you received, compare in constant time, and refuse a \`t\` more than 5 minutes from now. During a secret rotation the header carries a \`v1\` for each secret. Failed deliveries are retried 12 times over about two days; deduplicate on the event's \`id\`. \`verifySignature\` (the package's \`./webhooks\` export) does all this (docs/webhooks.md).

## Error codes

Every \`code\` the API answers, its HTTP status and when it happens:

${errorCodeList()}
`;
