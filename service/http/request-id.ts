/**
 * The `Request-Id` every answer carries, and JSON answers built with it. A JSON answer's headers are one
 * plain record: @hono/node-server writes such a record as it is, where Hono's `c.body` with more than one
 * header (or any header set before it) builds a web `Headers` that the server then copies and sorts.
 */
import { randomBytes } from "node:crypto";
import type { Context as HonoContext } from "hono";

// Request ids come from a pool of random bytes refilled 4 KiB at a time (one call to the CSPRNG per
// 341 requests instead of one each).
const ID_BYTES = 12;
let idPool = Buffer.alloc(0);
let idOffset = 0;
export const newRequestId = () => {
  if (idOffset + ID_BYTES > idPool.length) {
    idPool = randomBytes(4096);
    idOffset = 0;
  }
  idOffset += ID_BYTES;
  return `req_${idPool.toString("base64url", idOffset - ID_BYTES, idOffset)}`;
};

/** Answers built here, which carry their request's id already. */
const stamped = new WeakSet<Response>();

export const json = (
  c: HonoContext,
  status: number,
  bodyText: string,
  headers: Record<string, string> = {},
): Response => {
  const requestId: unknown = c.get("requestId");
  const response = new Response(bodyText, {
    status,
    headers: {
      "content-type": "application/json; charset=utf-8",
      ...(typeof requestId === "string" ? { "request-id": requestId } : {}),
      ...headers,
    },
  });
  if (typeof requestId === "string") stamped.add(response);
  return response;
};

/** Gives the answer its `Request-Id` unless it was built with one. */
export const stampRequestId = (c: HonoContext, requestId: string) => {
  if (!stamped.has(c.res)) c.header("Request-Id", requestId);
};
