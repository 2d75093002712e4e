/**
 * One HTTP attempt of a delivery, with undici: a POST with a hard time limit, redirects never followed,
 * at most a little of the answer read. Every connection goes through an SSRF-safe lookup, so the address
 * checked is the address dialled: public addresses only, or in test mode where private URLs are allowed,
 * loopback and private ones too (never cloud metadata, link-local or other special ranges).
 */
import { Context, Effect, Layer } from "effect";
import { Agent, type Dispatcher, request } from "undici";
import {
  dialRefusal,
  PRIVATE_ALLOWED,
  PUBLIC_ONLY,
  safeLookup,
  testModeLookup,
  type UrlRefusal,
} from "./url-policy.ts";

export interface Attempt {
  readonly url: string;
  readonly body: string | Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  /** Loopback and private addresses may be dialled too (test mode on a local deployment). */
  readonly allowPrivate: boolean;
}

export interface AttemptOutcome {
  readonly ok: boolean;
  readonly statusCode: number | null;
  readonly durationMs: number;
  readonly error: string | null;
  readonly responseBody: string | null;
}

export const RESPONSE_BODY_LIMIT = 1000;
/**
 * What is kept of an answer when the receiver may be a loopback or private address: enough to debug a
 * local receiver, too little to read an internal service's pages through the deliveries listing.
 */
export const PRIVATE_RESPONSE_BODY_LIMIT = 200;
const READ_LIMIT_BYTES = 16 * 1024;

const describeError = (error: unknown, timeoutMs: number): string => {
  const code = (error as { code?: unknown }).code;
  const name = (error as { name?: unknown }).name;
  if (name === "TimeoutError" || code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT")
    return `timed out after ${timeoutMs / 1000} s without a complete answer`;
  if (code === "UND_ERR_CONNECT_TIMEOUT") return `connection timed out after ${timeoutMs / 1000} s`;
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET") return "connection closed before an answer";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "host name does not resolve";
  const message = error instanceof Error ? error.message : String(error);
  return `${typeof code === "string" ? `${code}: ` : ""}${message}`.slice(0, 500);
};

/**
 * The answer's first `limit` characters, reading at most about READ_LIMIT_BYTES; an answer that fails
 * midway keeps nothing. An answer of a declared small length (undici holds the body to it) is read whole
 * in one call; the others chunk by chunk from the stream's events (its async iterator, used before, was
 * ~3 % of the dispatcher's sampled CPU in bench:webhooks, whose receivers answer without a length).
 */
const readCapped = (response: Dispatcher.ResponseData, limit: number): Promise<string> => {
  const declared = response.headers["content-length"];
  if (typeof declared === "string" && /^\d{1,5}$/.test(declared) && Number(declared) <= READ_LIMIT_BYTES)
    return response.body.text().then((text) => text.slice(0, limit));
  const body = response.body;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      body.off("data", onData);
      resolve(Buffer.concat(chunks).toString("utf8").slice(0, limit));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size < READ_LIMIT_BYTES) return;
      body.destroy();
      done();
    };
    body.on("data", onData);
    body.once("end", done);
    body.once("error", () => resolve(""));
  });
};

export const makeAttemptSender = (options: {
  readonly timeoutMs: number;
  readonly connectionsPerOrigin: number;
}) => {
  const agentOptions = {
    connections: options.connectionsPerOrigin,
    keepAliveTimeout: 4000,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  };
  const publicOnly = new Agent({
    ...agentOptions,
    connect: { timeout: options.timeoutMs, lookup: safeLookup },
  });
  const privateAllowed = new Agent({
    ...agentOptions,
    connect: { timeout: options.timeoutMs, lookup: testModeLookup },
  });

  // The dial-time check is a pure function of the URL's text and the scope: judged once per URL, not per
  // attempt (matching a host against every range cost ~2% of a busy dispatcher's CPU). Resolved names
  // are still checked on every connection by the lookup.
  const judged = new Map<string, { readonly url: URL; readonly refusal: UrlRefusal | undefined }>();
  const judge = (text: string, allowPrivate: boolean) => {
    const key = `${allowPrivate ? "p" : "-"}${text}`;
    const hit = judged.get(key);
    if (hit) return hit;
    const url = new URL(text);
    const verdict = { url, refusal: dialRefusal(url, allowPrivate ? PRIVATE_ALLOWED : PUBLIC_ONLY) };
    if (judged.size >= 10_000) judged.clear();
    judged.set(key, verdict);
    return verdict;
  };

  const send = async (attempt: Attempt): Promise<AttemptOutcome> => {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const { url, refusal } = judge(attempt.url, attempt.allowPrivate);
    if (refusal)
      return { ok: false, statusCode: null, durationMs: 0, error: refusal.message, responseBody: null };
    try {
      const response = await request(url, {
        method: "POST",
        headers: attempt.headers,
        body: attempt.body,
        dispatcher: attempt.allowPrivate ? privateAllowed : publicOnly,
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      const limit = attempt.allowPrivate ? PRIVATE_RESPONSE_BODY_LIMIT : RESPONSE_BODY_LIMIT;
      const responseBody = await readCapped(response, limit).catch(() => "");
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      const location = response.headers.location;
      return {
        ok,
        statusCode: response.statusCode,
        durationMs: elapsed(),
        error: ok
          ? null
          : response.statusCode >= 300 && response.statusCode < 400
            ? `redirect not followed${typeof location === "string" ? ` (Location: ${location.slice(0, 300)})` : ""}: answer with 2xx at the registered URL`
            : `answered ${response.statusCode}, not 2xx`,
        responseBody: responseBody === "" ? null : responseBody,
      };
    } catch (error) {
      return {
        ok: false,
        statusCode: null,
        durationMs: elapsed(),
        error: describeError(error, options.timeoutMs),
        responseBody: null,
      };
    }
  };

  return {
    send,
    destroy: () => Promise.all([publicOnly.destroy(), privateAllowed.destroy()]).then(() => undefined),
  };
};

export class AttemptSender extends Context.Service<
  AttemptSender,
  {
    /**
     * A promise rather than an Effect (the dispatcher's per-delivery hot path runs without the runtime);
     * it never rejects: a refused URL, a timeout or a network error is an outcome like an answer.
     */
    readonly send: (attempt: Attempt) => Promise<AttemptOutcome>;
  }
>()("AttemptSender") {
  static readonly layer = (options: { readonly timeoutMs: number; readonly connectionsPerOrigin: number }) =>
    Layer.effect(
      AttemptSender,
      Effect.map(
        Effect.acquireRelease(
          Effect.sync(() => makeAttemptSender(options)),
          (sender) => Effect.promise(sender.destroy),
        ),
        (sender) => ({ send: sender.send }),
      ),
    );
}
