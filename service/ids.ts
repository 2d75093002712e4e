/**
 * Prefixed, time-sortable object ids (`mer_01JD3…`): 48 bits of milliseconds then 80 random bits,
 * in Crockford base32, so ids sort by creation time and never collide in practice.
 */
import { randomFillSync } from "node:crypto";
import { Clock, Effect } from "effect";

export const ID_PREFIXES = {
  merchant: "mer",
  apiKey: "key",
  merchantChain: "mch",
  request: "req",
  mandate: "mdt",
  charge: "ch",
  payment: "pay",
  subscription: "sub",
  price: "price",
  invoice: "inv",
  coupon: "cpn",
  usageRecord: "ur",
  event: "evt",
  webhookEndpoint: "we",
  webhookDelivery: "whd",
  relayerTransaction: "rtx",
  consoleSession: "cs",
  portalSession: "bps",
  gasCost: "gc",
  balanceTransaction: "txn",
} as const;
export type IdKind = keyof typeof ID_PREFIXES;

/** What an id names, as messages say it (`No such webhook endpoint: …`). */
export const ID_NOUNS: Record<IdKind, string> = {
  merchant: "merchant",
  apiKey: "API key",
  merchantChain: "merchant chain",
  request: "request",
  mandate: "mandate",
  charge: "charge",
  payment: "payment",
  subscription: "subscription",
  price: "price",
  invoice: "invoice",
  coupon: "coupon",
  usageRecord: "usage record",
  event: "event",
  webhookEndpoint: "webhook endpoint",
  webhookDelivery: "webhook delivery",
  relayerTransaction: "relayer transaction",
  consoleSession: "console session",
  portalSession: "portal session",
  gasCost: "gas cost",
  balanceTransaction: "balance transaction",
};

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** `digits` base-32 digits of `value` (an integer below 2^53), most significant first. */
const base32 = (value: number, digits: number): string => {
  let out = "";
  let v = value;
  for (let i = 0; i < digits; i++) {
    out = ALPHABET[v % 32] + out;
    v = Math.floor(v / 32);
  }
  return out;
};

/** Bytes `from`..`from + 4` as one 40-bit number, big-endian (exact in a double). */
const uint40 = (bytes: Uint8Array, from: number): number => {
  const low =
    (((bytes[from + 1] ?? 0) << 24) |
      ((bytes[from + 2] ?? 0) << 16) |
      ((bytes[from + 3] ?? 0) << 8) |
      (bytes[from + 4] ?? 0)) >>>
    0;
  return (bytes[from] ?? 0) * 2 ** 32 + low;
};

/**
 * Pure: the same time and bytes give the same id. `random` must hold at least 10 bytes, read from
 * `offset`: their 80 bits in base 32, as two halves of 40 bits (8 digits each).
 */
export const encodeId = (prefix: string, millis: number, random: Uint8Array, offset = 0): string =>
  `${prefix}_${base32(millis, 10)}${base32(uint40(random, offset), 8)}${base32(uint40(random, offset + 5), 8)}`;

// Random bytes drawn 4 KB at a time (as crypto.randomUUID does): a `randomBytes(10)` per id was most of
// an id's cost, and a fan-out creates one per delivery.
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;
/** The offset in `pool` of 10 fresh random bytes, valid until the next call. */
const takeRandom10 = (): number => {
  if (poolOffset + 10 > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const offset = poolOffset;
  poolOffset += 10;
  return offset;
};

/** An id of `prefix` at `millis`, with fresh random bytes. */
export const freshId = (prefix: string, millis: number): string =>
  encodeId(prefix, millis, pool, takeRandom10());

export const newId = (kind: IdKind): Effect.Effect<string> =>
  Effect.map(Clock.currentTimeMillis, (millis) => freshId(ID_PREFIXES[kind], millis));

export const ID_PATTERN = /^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$/;
