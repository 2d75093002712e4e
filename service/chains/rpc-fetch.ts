/**
 * The `fetch` behind viem's HTTP transport for the service's JSON-RPC calls: undici's `request` on the
 * service's own connection pool, its answer read whole (up to RPC_RESPONSE_LIMIT) and handed to viem as
 * a `Response` built from the text. Node's `fetch` (undici's WHATWG fetch, with its Request objects and
 * web streams) cost 224–422 µs of CPU per call against a local node; this costs 103–140 µs
 * (measured in the billing benchmark; `git show 64b9879:docs/performance.md`, "Billing"). viem's own size check is then off
 * (`maxResponseBodySize: false` in chain-clients.ts): the cap is enforced here, while reading.
 */
import { type Dispatcher, request } from "undici";
import { ResponseBodyTooLargeError } from "viem";

/** viem's default cap on a JSON-RPC answer. */
export const RPC_RESPONSE_LIMIT = 10 * 1024 * 1024;

/** Statuses whose `Response` may not have a body. */
const NULL_BODY = new Set([101, 204, 205, 304]);

/** The answer's text, or ResponseBodyTooLargeError once more than `limit` bytes have arrived. */
const readText = (body: Dispatcher.ResponseData["body"], limit: number): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        body.destroy();
        reject(new ResponseBodyTooLargeError({ maxSize: limit, size }));
        return;
      }
      chunks.push(chunk);
    });
    body.once("end", () => resolve(Buffer.concat(chunks, size).toString("utf8")));
    body.once("error", reject);
  });

const headerPairs = (headers: Dispatcher.ResponseData["headers"]): [string, string][] => {
  const pairs: [string, string][] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const each of value) pairs.push([name, each]);
    else pairs.push([name, value]);
  }
  return pairs;
};

const plainHeaders = (headers: HeadersInit | undefined): Record<string, string> => {
  if (headers === undefined) return {};
  if (Array.isArray(headers)) return Object.fromEntries(headers);
  if (!(headers instanceof Headers)) return headers;
  const plain: Record<string, string> = {};
  headers.forEach((value, name) => {
    plain[name] = value;
  });
  return plain;
};

/**
 * A `fetch` for viem's `http` transport (`fetchFn`) over `dispatcher`. Requests it cannot pass on as
 * they are (a `Request` object, a streamed body) go to the global `fetch`; viem sends neither.
 */
export const fetchOver =
  (dispatcher: Dispatcher, limit = RPC_RESPONSE_LIMIT) =>
  async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const body = init?.body;
    if (input instanceof Request || (body != null && typeof body !== "string")) return fetch(input, init);
    const answer = await request(input, {
      dispatcher,
      method: (init?.method ?? "GET") as Dispatcher.HttpMethod,
      headers: plainHeaders(init?.headers),
      body: body ?? null,
      signal: init?.signal ?? null,
    });
    const text = await readText(answer.body, limit);
    return new Response(NULL_BODY.has(answer.statusCode) ? null : text, {
      status: answer.statusCode,
      headers: headerPairs(answer.headers),
    });
  };
