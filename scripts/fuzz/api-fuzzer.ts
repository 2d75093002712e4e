/**
 * A black-box fuzzer over every operation of `/v1/openapi.json` (plus the hosted authorization page's
 * JSON routes, which the document does not list): random and hostile paths, query strings, headers and
 * bodies, sent with bounded concurrency. The contract it checks: no answer is a 5xx, and every 4xx
 * has the error shape `{"error":{"type","code","message","param"}}`.
 *
 * Generation is seeded (fast-check), one batch of requests per derived seed; ids seen in successful
 * answers are fed back as path ids, so requests also reach real objects. Webhook URLs it sends are
 * loopback or invalid, never another host. Used by test/e2e/fuzz.test.ts and scripts/fuzz.ts.
 *
 * One long module on purpose: the generators of hostile input are a catalogue, read as a list.
 */
import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import fc from "fast-check";
import { Agent, fetch } from "undici";

type Json = Record<string, unknown>;

export interface Operation {
  readonly method: string;
  readonly path: string;
  readonly query: ReadonlyArray<{ readonly name: string; readonly schema: Json }>;
  readonly body?: Json;
  /** No API key: the hosted authorization page's API. */
  readonly public?: boolean;
  /** Only ever sent with a bad or no API key (it would disturb other users of the stack). */
  readonly unauthenticatedOnly?: boolean;
}

export interface FuzzRequest {
  readonly method: string;
  /** Path and query, already encoded as sent (may hold deliberately malformed escapes). */
  readonly target: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Sent over a raw socket: bytes fetch refuses to send (NUL in a header, raw bytes in the path). */
  readonly raw?: boolean;
}

export interface FuzzAnswer {
  readonly status: number;
  readonly text: string;
}

export interface FuzzFinding {
  readonly request: FuzzRequest;
  readonly answer: FuzzAnswer;
  readonly why: string;
}

export interface FuzzReport {
  readonly seed: number;
  readonly requests: number;
  readonly byClass: Readonly<Record<string, number>>;
  readonly byStatus: Readonly<Record<string, number>>;
  readonly serverErrors: number;
  readonly findings: readonly FuzzFinding[];
  readonly durationMs: number;
}

export interface FuzzOptions {
  readonly baseUrl: string;
  /** A test-mode key of a merchant the fuzzer may fill with objects. */
  readonly key: string;
  readonly requests: number;
  readonly seed: number;
  readonly concurrency?: number;
  /**
   * Loopback address to send from (e.g. 127.0.0.77): the hosted page limits requests per client
   * address, and a fuzz run should not use up the budget of other clients on 127.0.0.1.
   */
  readonly localAddress?: string;
  /** Called every `progressEvery` requests. */
  readonly onProgress?: (done: number) => void;
  readonly progressEvery?: number;
}

const PREFIXES = [
  "mer",
  "key",
  "mch",
  "mdt",
  "ch",
  "sub",
  "price",
  "inv",
  "cpn",
  "ur",
  "evt",
  "we",
  "whd",
  "rtx",
];
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const LOOPBACK_URL = "http://127.0.0.1:9/fuzz";

// ---------------------------------------------------------------------------------------------------
// The operations

const resolveRef = (doc: Json, schema: Json | undefined): Json | undefined => {
  if (!schema) return undefined;
  const ref = schema.$ref;
  if (typeof ref !== "string") return schema;
  const name = ref.replace("#/components/schemas/", "");
  return ((doc.components as Json | undefined)?.schemas as Json | undefined)?.[name] as Json | undefined;
};

const PUBLIC_OPERATIONS: readonly Operation[] = [
  { method: "GET", path: "/authorize/{token}/session", query: [], public: true },
  {
    method: "POST",
    path: "/authorize/{token}/terms",
    query: [],
    public: true,
    body: {
      type: "object",
      properties: { customer_address: { type: "string" } },
      required: ["customer_address"],
    },
  },
  {
    method: "POST",
    path: "/authorize/{token}/signatures",
    query: [],
    public: true,
    body: {
      type: "object",
      properties: {
        customer_address: { type: "string" },
        permit_signature: { type: "string" },
        terms_signature: { type: "string" },
        deadline: { type: "string" },
      },
    },
  },
  { method: "GET", path: "/authorize/{token}", query: [], public: true },
];

/** Every operation of the document, plus the authorization page's routes when the document lacks them. */
export const operationsOf = (doc: Json): Operation[] => {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>))
    for (const [method, raw] of Object.entries(item)) {
      const operation = raw as Json;
      const parameters = (operation.parameters ?? []) as Array<{ name: string; in: string; schema: Json }>;
      const content = (operation.requestBody as Json | undefined)?.content as Json | undefined;
      const body = resolveRef(doc, (content?.["application/json"] as Json | undefined)?.schema as Json);
      operations.push({
        method: method.toUpperCase(),
        path,
        query: parameters.filter((p) => p.in === "query").map((p) => ({ name: p.name, schema: p.schema })),
        ...(body ? { body } : {}),
        // Moving the shared chain's clock would disturb every other user of the stack.
        ...(path === "/v1/test/clock/advance" ? { unauthenticatedOnly: true } : {}),
      });
    }
  for (const extra of PUBLIC_OPERATIONS)
    if (!operations.some((o) => o.path === extra.path && o.method === extra.method)) operations.push(extra);
  return operations;
};

// ---------------------------------------------------------------------------------------------------
// Values

/** Any UTF-16 code unit, lone surrogates included. */
const codeUnitString = (maxLength: number) =>
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n)), maxLength });

const HOSTILE_STRINGS = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "x\udc00y",
  "\ud83d",
  "😀",
  "\u202e\u0000",
  "\ufeff",
  "null",
  "true",
  "0",
  "-1",
  "1e400",
  "-0",
  "NaN",
  "Infinity",
  "0x10",
  "__proto__",
  "constructor",
  "prototype",
  "../../etc/passwd",
  "%00",
  "%",
  "\r\n",
  "\t",
  "' OR 1=1 --",
  "$1",
  "\\",
  '"',
  "x".repeat(5001),
  "é".repeat(2600),
  "😀".repeat(1500),
  "a".repeat(300),
  "cus_\u0000",
  "9".repeat(90),
  "0.0000001",
  "1.5",
  "18446744073709551616",
];

const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 2, arbitrary: codeUnitString(40) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", minLength: 200, maxLength: 3000 }) },
);

const hostileNumber = fc.oneof(
  fc.constantFrom(0, -1, 1.5, -0.5, 2 ** 53, 2 ** 64, 1e308, -1e308, 31337, 31338, 31339, 999999, 101, 1e21),
  fc.integer(),
  fc.double(),
);

/** Raw JSON number texts that JSON.parse turns into Infinity, -0, or loses precision on. */
const HUGE_NUMBER_TEXTS = ["1e400", "-1e400", "-0", "123456789012345678901234567890", "1E-400", "0.1e1"];

const prefixedId = (prefixes: readonly string[]) =>
  fc
    .tuple(
      fc.constantFrom(...prefixes),
      fc.array(fc.constantFrom(...CROCKFORD), { minLength: 26, maxLength: 26 }),
    )
    .map(([prefix, chars]) => `${prefix}_${chars.join("")}`);

const junk: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    hostileString,
    hostileNumber,
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(hostileString, fc.constantFrom("__proto__", "constructor")), tie("value"), {
      maxKeys: 4,
    }),
  ),
})).value;

// ---------------------------------------------------------------------------------------------------
// Requests (abstract, then materialised against the ids seen so far)

interface Pool {
  /** Real ids and tokens seen in answers, by prefix ("token" for authorization tokens). */
  readonly ids: Map<string, string[]>;
}

type PathValue =
  | { readonly kind: "real"; readonly pick: number }
  | { readonly kind: "literal"; readonly text: string; readonly encoded: boolean };

const PATH_JUNK = [
  "%00",
  "x%00",
  "%ED%A0%80",
  "%F0%9F%98%80",
  "%FF",
  "%",
  "%zz",
  "..",
  "%2e%2e",
  "%2F",
  "a%2Fb",
  "%20",
  "%0A",
  "\u0000",
  `mdt_${"0".repeat(26)}%00`,
  "x".repeat(3000),
];

const pathValue: fc.Arbitrary<PathValue> = fc.oneof(
  { weight: 5, arbitrary: fc.nat().map((pick) => ({ kind: "real" as const, pick })) },
  {
    weight: 3,
    arbitrary: prefixedId(PREFIXES).map((text) => ({ kind: "literal" as const, text, encoded: true })),
  },
  {
    weight: 3,
    arbitrary: fc
      .constantFrom(...PATH_JUNK)
      .map((text) => ({ kind: "literal" as const, text, encoded: false })),
  },
  { weight: 2, arbitrary: hostileString.map((text) => ({ kind: "literal" as const, text, encoded: true })) },
);

const PREFIX_OF_SEGMENT: Record<string, string> = {
  mandates: "mdt",
  charges: "ch",
  events: "evt",
  prices: "price",
  coupons: "cpn",
  subscriptions: "sub",
  invoices: "inv",
  webhook_endpoints: "we",
  authorize: "token",
};

/** Percent-encodes like encodeURIComponent, but a lone surrogate becomes the (invalid) escape of its bytes. */
const encodeSegment = (text: string): string => {
  let out = "";
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    if (code >= 0xd800 && code <= 0xdfff)
      out +=
        `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`.toUpperCase();
    else out += encodeURIComponent(char);
  }
  return out;
};

interface AbstractRequest {
  readonly op: number;
  readonly method: "same" | "other";
  readonly otherMethod: string;
  readonly pathValues: readonly PathValue[];
  readonly query: ReadonlyArray<{ readonly name: string; readonly value: string; readonly valid: boolean }>;
  readonly queryMode: "schema" | "hostile" | "none";
  readonly auth: "valid" | "none" | "malformed" | "unknown" | "nul" | "obs";
  readonly idempotency: "uuid" | "none" | "long" | "space" | "nul" | "unicode" | "fixed";
  readonly contentType: "json" | "none" | "text" | "form" | "json-charset" | "weird";
  readonly body: BodyPlan;
  readonly rawPathBytes: boolean;
}

type BodyPlan =
  | {
      readonly kind: "fields";
      readonly fields: ReadonlyArray<readonly [number, FieldValue]>;
      readonly extra: Json;
    }
  | { readonly kind: "junk"; readonly value: unknown }
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "huge"; readonly bytes: number }
  | { readonly kind: "long-field"; readonly length: number }
  | { readonly kind: "duplicate-keys" }
  | { readonly kind: "huge-number"; readonly text: string }
  | { readonly kind: "deep"; readonly depth: number }
  | { readonly kind: "empty" };

type FieldValue =
  | { readonly kind: "plausible"; readonly pick: number }
  | { readonly kind: "swap-type"; readonly pick: number }
  | { readonly kind: "junk"; readonly value: unknown }
  | { readonly kind: "omit" };

const fieldValue: fc.Arbitrary<FieldValue> = fc.oneof(
  { weight: 6, arbitrary: fc.nat().map((pick) => ({ kind: "plausible" as const, pick })) },
  { weight: 2, arbitrary: fc.nat().map((pick) => ({ kind: "swap-type" as const, pick })) },
  { weight: 3, arbitrary: junk.map((value) => ({ kind: "junk" as const, value })) },
  { weight: 1, arbitrary: fc.constant({ kind: "omit" as const }) },
);

const bodyPlan: fc.Arbitrary<BodyPlan> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc
      .record({
        fields: fc.array(fc.tuple(fc.nat({ max: 7 }), fieldValue), { maxLength: 8 }),
        extra: fc.oneof(
          { weight: 5, arbitrary: fc.constant({}) },
          {
            weight: 1,
            arbitrary: fc.dictionary(
              fc.oneof(fc.constantFrom("__proto__", "constructor", "toString", "metadata"), hostileString),
              junk,
              { maxKeys: 2 },
            ),
          },
        ),
      })
      .map((r) => ({ kind: "fields" as const, ...r }) as BodyPlan),
  },
  { weight: 2, arbitrary: junk.map((value) => ({ kind: "junk" as const, value })) },
  {
    weight: 1,
    arbitrary: fc
      .oneof(
        fc.constantFrom("{", "[]", "null", '"x"', "1", "{'a':1}", '{"a":1,}', "\u0000", '{"a":"\\ud800"}'),
        codeUnitString(50),
      )
      .map((text) => ({ kind: "text" as const, text })),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 60_000, max: 72_000 }).map((bytes) => ({ kind: "huge" as const, bytes })),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 4_990, max: 60_000 })
      .map((length) => ({ kind: "long-field" as const, length })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "duplicate-keys" as const }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(...HUGE_NUMBER_TEXTS).map((text) => ({ kind: "huge-number" as const, text })),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 15, max: 20_000 }).map((depth) => ({ kind: "deep" as const, depth })),
  },
  { weight: 2, arbitrary: fc.constant({ kind: "empty" as const }) },
);

const abstractRequest = (operations: number): fc.Arbitrary<AbstractRequest> =>
  fc.record({
    op: fc.nat({ max: operations - 1 }),
    method: fc.oneof({ weight: 19, arbitrary: fc.constant("same" as const) }, fc.constant("other" as const)),
    otherMethod: fc.constantFrom("GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"),
    pathValues: fc.array(pathValue, { minLength: 2, maxLength: 2 }),
    query: fc.array(
      fc.record({
        name: fc.oneof(
          {
            weight: 4,
            arbitrary: fc.constantFrom("limit", "starting_after", "customer", "status", "type", "chain"),
          },
          { weight: 1, arbitrary: hostileString },
        ),
        value: fc.oneof(
          fc.constantFrom("-1", "0", "1.5", "101", "1e3", "10", "NaN", "", "9".repeat(40), "true", "csv"),
          hostileString,
        ),
        valid: fc.boolean(),
      }),
      { maxLength: 4 },
    ),
    queryMode: fc.constantFrom("schema", "schema", "hostile", "none"),
    auth: fc.oneof(
      { weight: 20, arbitrary: fc.constant("valid" as const) },
      fc.constantFrom(
        "none" as const,
        "malformed" as const,
        "unknown" as const,
        "nul" as const,
        "obs" as const,
      ),
    ),
    idempotency: fc.oneof(
      { weight: 20, arbitrary: fc.constant("uuid" as const) },
      fc.constantFrom(
        "none" as const,
        "long" as const,
        "space" as const,
        "nul" as const,
        "unicode" as const,
        "fixed" as const,
      ),
    ),
    contentType: fc.oneof(
      { weight: 20, arbitrary: fc.constant("json" as const) },
      fc.constantFrom(
        "none" as const,
        "text" as const,
        "form" as const,
        "json-charset" as const,
        "weird" as const,
      ),
    ),
    body: bodyPlan,
    rawPathBytes: fc.oneof({ weight: 40, arbitrary: fc.constant(false) }, fc.constant(true)),
  });

// ---------------------------------------------------------------------------------------------------
// Materialising

const randomAddress = (pick: number) => `0x${(pick * 2654435761).toString(16).padStart(40, "0").slice(-40)}`;

/** A value that the field's name or schema suggests, or a real id from the pool. */
const plausible = (name: string, schema: Json, pick: number, pool: Pool): unknown => {
  const fromPool = (prefix: string) => {
    const ids = pool.ids.get(prefix) ?? [];
    return ids.length > 0 ? ids[pick % ids.length] : `${prefix}_${"0".repeat(26)}`;
  };
  switch (name) {
    case "chain":
      return [31337, 31338, 31339, 1][pick % 4];
    case "token":
      return ["USDC", "DAI", "usdc"][pick % 3];
    case "payout_address":
    case "customer_address":
      return randomAddress(pick);
    case "period":
      return ["month", "week"][pick % 2];
    case "url":
      return [LOOPBACK_URL, "ftp://127.0.0.1/x", "not a url", "http://127.0.0.1:0/"][pick % 4];
    case "events":
      return [["charge.succeeded"], ["*"], ["nope"], []][pick % 4];
    case "price":
      return fromPool("price");
    case "coupon":
      return fromPool("cpn");
    case "endpoint":
      return fromPool("we");
    case "seconds":
      return [1, 60, 0][pick % 3];
  }
  if (name.endsWith("_decimal")) return ["1", "25", "0.5", "19.99", "0", "100000000000"][pick % 6];
  const type = schema.type;
  if (Array.isArray(schema.enum)) return schema.enum[pick % schema.enum.length];
  if (type === "integer" || type === "number") return [1, 2, 12, 120, 50][pick % 5];
  if (type === "boolean") return pick % 2 === 0;
  if (type === "array") return [plausible(name, (schema.items ?? {}) as Json, pick, pool)];
  if (type === "object") return materialiseObject(schema, [], {}, pool);
  if (schema.anyOf) return plausible(name, ((schema.anyOf as Json[])[0] ?? {}) as Json, pick, pool);
  return [`cus_${pick % 97}`, "ref_1", "Team plan", "api_call"][pick % 4];
};

const swapType = (value: unknown, pick: number): unknown => {
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return Number.isNaN(Number(value)) ? pick : Number(value);
  if (typeof value === "boolean") return value ? "true" : 0;
  return pick % 2 === 0 ? String(value) : [value];
};

function materialiseObject(
  schema: Json,
  fields: ReadonlyArray<readonly [number, FieldValue]>,
  extra: Json,
  pool: Pool,
): Json {
  const properties = Object.entries((schema.properties ?? {}) as Record<string, Json>);
  const out: Json = {};
  // Required fields start plausible, so many requests get past validation and into the handlers.
  for (const name of (schema.required ?? []) as string[])
    out[name] = plausible(name, ((schema.properties as Json)[name] ?? {}) as Json, 0, pool);
  for (const [index, value] of fields) {
    const entry = properties[index % Math.max(1, properties.length)];
    if (!entry) continue;
    const [name, fieldSchema] = entry;
    if (value.kind === "omit") delete out[name];
    else if (value.kind === "plausible") out[name] = plausible(name, fieldSchema, value.pick, pool);
    else if (value.kind === "swap-type")
      out[name] = swapType(plausible(name, fieldSchema, value.pick, pool), value.pick);
    else out[name] = value.value;
  }
  for (const [key, value] of Object.entries(extra))
    Object.defineProperty(out, key, { value, enumerable: true });
  return out;
}

/** Webhook URLs must never leave the machine: any `url` that is an http(s) URL to another host becomes loopback. */
const confineUrls = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(confineUrls);
  if (value === null || typeof value !== "object") return value;
  const out: Json = {};
  for (const [key, item] of Object.entries(value as Json)) {
    let confined = confineUrls(item);
    if (key === "url" && typeof confined === "string" && /^\s*[a-z][a-z0-9+.-]*:/i.test(confined)) {
      let host = "";
      try {
        host = new URL(confined.trim()).hostname;
      } catch {
        host = "";
      }
      if (host !== "127.0.0.1" && /^\s*(https?|wss?):/i.test(confined)) confined = LOOPBACK_URL;
    }
    Object.defineProperty(out, key, { value: confined, enumerable: true });
  }
  return out;
};

const materialiseBody = (op: Operation, plan: BodyPlan, pool: Pool): string | undefined => {
  const schema = op.body ?? { type: "object", properties: {} };
  const base = () => materialiseObject(schema, [], {}, pool);
  switch (plan.kind) {
    case "fields":
      return JSON.stringify(confineUrls(materialiseObject(schema, plan.fields, plan.extra, pool)));
    case "junk":
      return JSON.stringify(confineUrls(plan.value));
    case "text":
      return plan.text;
    case "huge":
      return JSON.stringify({ ...base(), padding: "x".repeat(plan.bytes) });
    case "long-field": {
      const names = Object.keys((schema.properties ?? {}) as Json);
      const name = names[plan.length % Math.max(1, names.length)] ?? "customer";
      return JSON.stringify(confineUrls({ ...base(), [name]: "y".repeat(plan.length) }));
    }
    case "duplicate-keys": {
      const text = JSON.stringify(confineUrls(base()));
      const names = Object.keys((schema.properties ?? {}) as Json);
      const name = names[0] ?? "a";
      return text === "{}"
        ? `{"${name}":1,"${name}":"\\u0000"}`
        : `${text.slice(0, -1)},"${name}":"\\u0000x"}`;
    }
    case "huge-number": {
      const names = Object.keys((schema.properties ?? {}) as Json);
      const name = names[plan.text.length % Math.max(1, names.length)] ?? "limit";
      const text = JSON.stringify(confineUrls(base()));
      return text === "{}" ? `{"${name}":${plan.text}}` : `${text.slice(0, -1)},"${name}":${plan.text}}`;
    }
    case "deep": {
      const names = Object.keys((schema.properties ?? {}) as Json);
      const nested = `${"[".repeat(plan.depth)}1${"]".repeat(plan.depth)}`;
      const text = JSON.stringify(confineUrls(base()));
      const field = JSON.stringify(names[0] ?? "x");
      return text === "{}" ? `{${field}:${nested}}` : `${text.slice(0, -1)},${field}:${nested}}`;
    }
    case "empty":
      return op.method === "POST" ? undefined : "";
  }
};

const queryValue = (name: string, schema: Json, pick: number, pool: Pool): string => {
  if (name === "starting_after" || name === "event" || name === "subscription") {
    const prefix =
      name === "event"
        ? "evt"
        : name === "subscription"
          ? "sub"
          : (PREFIXES[pick % PREFIXES.length] ?? "mdt");
    const ids = pool.ids.get(prefix) ?? [];
    return ids[pick % Math.max(1, ids.length)] ?? `${prefix}_${"1".repeat(26)}`;
  }
  if (Array.isArray(schema.enum)) return String(schema.enum[pick % schema.enum.length]);
  if (name === "limit") return String([1, 10, 100, 1000][pick % 4]);
  if (name === "chain") return String([31337, 31338][pick % 2]);
  if (/block|from|to/.test(name)) return String(pick % 1000);
  return `cus_${pick % 5}`;
};

const materialise = (
  abstract: AbstractRequest,
  operations: readonly Operation[],
  pool: Pool,
  key: string,
): FuzzRequest => {
  const op = operations[abstract.op] as Operation;
  const method = abstract.method === "same" ? op.method : abstract.otherMethod;
  let raw = false;
  let index = 0;
  const segments = op.path.split("/").map((segment, i, all) => {
    const match = /^\{(\w+)\}$/.exec(segment);
    if (!match) return segment;
    const value = abstract.pathValues[index++ % abstract.pathValues.length] as PathValue;
    if (value.kind === "real") {
      const prefix = PREFIX_OF_SEGMENT[all[i - 1] ?? ""] ?? PREFIX_OF_SEGMENT[all[i - 2] ?? ""] ?? "mdt";
      const ids = pool.ids.get(prefix) ?? [];
      return encodeSegment(ids[value.pick % Math.max(1, ids.length)] ?? `${prefix}_${"2".repeat(26)}`);
    }
    if (!value.encoded) {
      if ([...value.text].some((c) => c < " " || c > "~")) raw = true;
      return value.text;
    }
    return encodeSegment(value.text);
  });
  let target = segments.join("/");
  if (abstract.rawPathBytes) {
    raw = true;
    target += "\u0000";
  }

  const params: string[] = [];
  if (abstract.queryMode === "schema")
    for (const [i, entry] of abstract.query.entries()) {
      const param = op.query[i % Math.max(1, op.query.length)];
      if (!param) break;
      const value = entry.valid
        ? queryValue(param.name, param.schema, entry.value.length + i, pool)
        : entry.value;
      params.push(`${encodeURIComponent(param.name)}=${encodeSegment(value)}`);
    }
  else if (abstract.queryMode === "hostile")
    for (const entry of abstract.query)
      params.push(`${encodeSegment(entry.name)}=${encodeSegment(entry.value)}`);
  if (params.length > 0) target += `?${params.join("&")}`;

  const headers: Record<string, string> = {};
  const secret = op.public ? undefined : key;
  const auth = op.unauthenticatedOnly && abstract.auth === "valid" ? "unknown" : abstract.auth;
  if (secret !== undefined || auth !== "valid")
    switch (auth) {
      case "valid":
        headers.authorization = `Bearer ${secret}`;
        break;
      case "malformed":
        headers.authorization = "Basic Zm9vOmJhcg==";
        break;
      case "unknown":
        headers.authorization = `Bearer sk_test_${"Z".repeat(43)}`;
        break;
      case "nul":
        headers.authorization = `Bearer ${key}\u0000`;
        raw = true;
        break;
      case "obs":
        headers.authorization = `Bearer sk_test_\u00ff\u00e9${"a".repeat(20)}`;
        raw = true;
        break;
      case "none":
        break;
    }
  if (method === "POST")
    switch (abstract.idempotency) {
      case "uuid":
        headers["idempotency-key"] = randomUUID();
        break;
      case "long":
        headers["idempotency-key"] = "k".repeat(300);
        break;
      case "space":
        headers["idempotency-key"] = "a b";
        break;
      case "nul":
        headers["idempotency-key"] = "a\u0000b";
        raw = true;
        break;
      case "unicode":
        headers["idempotency-key"] = "clé\u00e9";
        raw = true;
        break;
      case "fixed":
        headers["idempotency-key"] = "fuzz-fixed-key";
        break;
      case "none":
        break;
    }
  const body =
    method === "GET" || method === "OPTIONS" ? undefined : materialiseBody(op, abstract.body, pool);
  if (body !== undefined)
    switch (abstract.contentType) {
      case "json":
        headers["content-type"] = "application/json";
        break;
      case "json-charset":
        headers["content-type"] = "application/json; charset=utf-16";
        break;
      case "text":
        headers["content-type"] = "text/plain";
        break;
      case "form":
        headers["content-type"] = "application/x-www-form-urlencoded";
        break;
      case "weird":
        headers["content-type"] = "application/jsonx";
        break;
      case "none":
        break;
    }
  return { method, target, headers, ...(body !== undefined ? { body } : {}), ...(raw ? { raw } : {}) };
};

// ---------------------------------------------------------------------------------------------------
// Sending

interface Transport {
  readonly baseUrl: string;
  readonly agent: Agent;
  readonly localAddress?: string;
}

const sendFetch = async (transport: Transport, request: FuzzRequest): Promise<FuzzAnswer> => {
  const response = await fetch(`${transport.baseUrl}${request.target}`, {
    method: request.method,
    headers: request.headers,
    dispatcher: transport.agent,
    ...(request.body !== undefined ? { body: request.body } : {}),
  });
  return { status: response.status, text: await response.text() };
};

const dechunk = (body: Buffer): Buffer => {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf("\r\n", at);
    if (lineEnd < 0) break;
    const size = Number.parseInt(body.subarray(at, lineEnd).toString("latin1"), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
};

/** HTTP/1.1 over a socket, bytes as given (latin1 for the head): what fetch refuses to send. */
const sendRaw = (transport: Transport, request: FuzzRequest): Promise<FuzzAnswer> =>
  new Promise((resolve, reject) => {
    const url = new URL(transport.baseUrl);
    const body = request.body === undefined ? undefined : Buffer.from(request.body, "utf8");
    const head = [
      `${request.method} ${request.target} HTTP/1.1`,
      `host: ${url.host}`,
      "connection: close",
      ...Object.entries(request.headers).map(([name, value]) => `${name}: ${value}`),
      ...(body ? [`content-length: ${body.length}`] : []),
      "",
      "",
    ].join("\r\n");
    const socket = connect({
      port: Number(url.port),
      host: url.hostname,
      ...(transport.localAddress ? { localAddress: transport.localAddress } : {}),
    });
    const chunks: Buffer[] = [];
    socket.setTimeout(30_000, () => socket.destroy(new Error("raw request timed out")));
    socket.on("connect", () => {
      socket.write(Buffer.from(head, "latin1"));
      if (body) socket.write(body);
    });
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      const all = Buffer.concat(chunks);
      const split = all.indexOf("\r\n\r\n");
      const headText = all.subarray(0, split < 0 ? all.length : split).toString("latin1");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(headText)?.[1] ?? 0);
      const rest = split < 0 ? Buffer.alloc(0) : all.subarray(split + 4);
      const text = (/\r\ntransfer-encoding:\s*chunked/i.test(headText) ? dechunk(rest) : rest).toString(
        "utf8",
      );
      resolve({ status, text });
    });
  });

const hasErrorShape = (text: string): boolean => {
  try {
    const error = (JSON.parse(text) as { error?: Json }).error;
    return (
      !!error &&
      typeof error.type === "string" &&
      typeof error.code === "string" &&
      typeof error.message === "string" &&
      (error.param === null || typeof error.param === "string")
    );
  } catch {
    return false;
  }
};

const ID_IN_TEXT = /"(?:id|mandate|price|coupon|subscription|event)":"([a-z]+)_([0-9A-HJKMNP-TV-Z]{26})"/g;
const TOKEN_IN_TEXT = /\/authorize\/([A-Za-z0-9_-]{20,80})"/g;

const harvest = (pool: Pool, text: string) => {
  const add = (prefix: string, id: string) => {
    const ids = pool.ids.get(prefix) ?? [];
    if (ids.length < 50 && !ids.includes(id)) {
      ids.push(id);
      pool.ids.set(prefix, ids);
    }
  };
  for (const match of text.matchAll(ID_IN_TEXT)) add(match[1] as string, `${match[1]}_${match[2]}`);
  for (const match of text.matchAll(TOKEN_IN_TEXT)) add("token", match[1] as string);
};

/** A short, printable description of a request for a failure message. */
export const describeRequest = (request: FuzzRequest): string => {
  const cut = (text: string, max: number) =>
    JSON.stringify(text.length > max ? `${text.slice(0, max)}…(${text.length} chars)` : text);
  const headers = Object.entries(request.headers).map(
    ([name, value]) =>
      `${name}: ${cut(value.replace(/sk_(test|live)_[A-Za-z0-9]{20,64}/, "sk_$1_<key>"), 60)}`,
  );
  return [
    `${request.method} ${cut(request.target, 200)}${request.raw ? " (raw socket)" : ""}`,
    ...headers,
    ...(request.body !== undefined ? [`body: ${cut(request.body, 300)}`] : []),
  ].join("\n  ");
};

const BATCH = 64;

/** Creates a few real objects so fuzzed paths can name them. */
const seedPool = async (transport: Transport, key: string, pool: Pool) => {
  const post = async (path: string, body: unknown) => {
    const answer = await sendFetch(transport, {
      method: "POST",
      target: path,
      headers: {
        authorization: `Bearer ${key}`,
        "idempotency-key": randomUUID(),
        "content-type": "application/json",
      },
      body: JSON.stringify(body),
    });
    harvest(pool, answer.text);
    return answer;
  };
  const chains = JSON.parse(
    (
      await sendFetch(transport, {
        method: "GET",
        target: "/v1/chains",
        headers: { authorization: `Bearer ${key}` },
      })
    ).text,
  ) as { data?: Array<{ id: number; subscriptions_available?: boolean }> };
  const chain = chains.data?.find((c) => c.subscriptions_available !== false)?.id ?? 31337;
  await post("/v1/merchant/chains", { chain, payout_address: randomAddress(Date.now() % 1_000_000) });
  await post("/v1/mandates", { cap_decimal: "25", period: "month", customer: "cus_fuzz", chain });
  await post("/v1/payments", { amount_decimal: "5", chain, reference: "fuzz" });
  const price = await post("/v1/prices", { product_name: "Fuzz", amount_decimal: "10", chain });
  await post("/v1/coupons", { percent_off: 10, duration_in_months: 2 });
  await post("/v1/webhook_endpoints", { url: LOOPBACK_URL, events: ["charge.succeeded"] });
  const priceId = (JSON.parse(price.text) as { id?: string }).id;
  if (priceId) await post("/v1/subscriptions", { customer: "cus_fuzz", price: priceId });
};

export const runFuzz = async (options: FuzzOptions): Promise<FuzzReport> => {
  const started = performance.now();
  const concurrency = options.concurrency ?? 16;
  const transport: Transport = {
    baseUrl: options.baseUrl,
    agent: new Agent({
      connections: concurrency,
      // A client option: undici passes the client's own localAddress over one given in `connect`.
      ...(options.localAddress ? { localAddress: options.localAddress } : {}),
    }),
    ...(options.localAddress ? { localAddress: options.localAddress } : {}),
  };
  const doc = JSON.parse(
    (await sendFetch(transport, { method: "GET", target: "/v1/openapi.json", headers: {} })).text,
  ) as Json;
  const operations = operationsOf(doc);
  const pool: Pool = { ids: new Map() };
  await seedPool(transport, options.key, pool);
  const arbitrary = abstractRequest(operations.length);
  const byClass: Record<string, number> = {};
  const byStatus: Record<string, number> = {};
  const findings: FuzzFinding[] = [];
  let serverErrors = 0;
  let next = 0;
  let done = 0;
  const batches = new Map<number, AbstractRequest[]>();
  const abstractAt = (i: number): AbstractRequest => {
    const batch = Math.floor(i / BATCH);
    let samples = batches.get(batch);
    if (!samples) {
      samples = fc.sample(arbitrary, { seed: (options.seed + batch * 7919) | 0, numRuns: BATCH });
      batches.set(batch, samples);
    }
    const sample = samples[i % BATCH] as AbstractRequest;
    if (i % BATCH === BATCH - 1) batches.delete(batch);
    return sample;
  };
  const worker = async () => {
    for (let i = next++; i < options.requests; i = next++) {
      const request = materialise(abstractAt(i), operations, pool, options.key);
      let answer: FuzzAnswer;
      try {
        answer = await (request.raw ? sendRaw : sendFetch)(transport, request);
      } catch (error) {
        answer = { status: 0, text: String(error) };
      }
      const statusClass = answer.status === 0 ? "no answer" : `${Math.floor(answer.status / 100)}xx`;
      byClass[statusClass] = (byClass[statusClass] ?? 0) + 1;
      byStatus[answer.status] = (byStatus[answer.status] ?? 0) + 1;
      if (answer.status >= 500 || answer.status === 0) {
        serverErrors += answer.status >= 500 ? 1 : 0;
        findings.push({
          request,
          answer,
          why: answer.status === 0 ? "no answer" : `status ${answer.status}`,
        });
      } else if (answer.status >= 400 && !hasErrorShape(answer.text) && !isHtmlPage(request, answer))
        findings.push({ request, answer, why: `${answer.status} without the error shape` });
      else if (answer.status < 300) harvest(pool, answer.text);
      done++;
      if (options.onProgress && done % (options.progressEvery ?? 10_000) === 0) options.onProgress(done);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker)).finally(() => transport.agent.close());
  return {
    seed: options.seed,
    requests: done,
    byClass,
    byStatus,
    serverErrors,
    findings,
    durationMs: Math.round(performance.now() - started),
  };
};

/** The hosted page itself answers HTML (its 404 is a page for the customer, not an API error). */
/**
 * A hosted page's HTML answer to a GET of its path. The path is the one the server sees: a URL's dot
 * segments are resolved by the client and the server alike, so `/authorize/./session` is the page of the
 * token `session`, not the session route.
 */
const isHtmlPage = (request: FuzzRequest, answer: FuzzAnswer) =>
  request.method === "GET" &&
  /^\/authorize\/[^/]*$/.test(new URL(request.target, "http://fuzz.invalid").pathname) &&
  answer.text.startsWith("<!");

export const formatReport = (report: FuzzReport): string => {
  const classes = Object.entries(report.byClass)
    .sort()
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  const lines = [
    `fuzz: ${report.requests} requests in ${(report.durationMs / 1000).toFixed(1)} s (${Math.round(report.requests / (report.durationMs / 1000))}/s), seed ${report.seed}`,
    `  by class: ${classes}`,
    `  5xx: ${report.serverErrors}; findings: ${report.findings.length}`,
  ];
  const seen = new Set<string>();
  for (const finding of report.findings) {
    const signature = `${finding.why} ${finding.request.method} ${finding.request.target.split("/").slice(0, 3).join("/")}`;
    if (seen.has(signature) || seen.size >= 10) continue;
    seen.add(signature);
    lines.push(
      `- ${finding.why}: ${finding.answer.text.slice(0, 200)}\n  ${describeRequest(finding.request)}`,
    );
  }
  return lines.join("\n");
};
