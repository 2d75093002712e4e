/**
 * Prefixed, time-sortable object ids (`mer_01JD3…`): 48 bits of milliseconds then 80 random bits,
 * in Crockford base32, so ids sort by creation time and never collide in practice.
 */
import { randomBytes } from "node:crypto";
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
};

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** Pure: the same time and bytes give the same id. `random` must hold at least 10 bytes. */
export const encodeId = (prefix: string, millis: number, random: Uint8Array): string => {
  let time = "";
  let t = millis;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let bits = 0n;
  for (let i = 0; i < 10; i++) bits = (bits << 8n) | BigInt(random[i] ?? 0);
  let rest = "";
  for (let i = 0; i < 16; i++) {
    rest = ALPHABET[Number(bits & 31n)] + rest;
    bits >>= 5n;
  }
  return `${prefix}_${time}${rest}`;
};

export const newId = (kind: IdKind): Effect.Effect<string> =>
  Effect.map(Clock.currentTimeMillis, (millis) => encodeId(ID_PREFIXES[kind], millis, randomBytes(10)));

export const ID_PATTERN = /^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$/;
