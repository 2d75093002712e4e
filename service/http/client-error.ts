/**
 * Requests Node's HTTP parser refuses before any route runs (a NUL or other forbidden byte in the
 * request line or a header, a malformed request line, headers over the 16 KiB limit) get the one
 * error shape too, instead of Node's bare `400 Bad Request` without a body.
 */
import type { Duplex } from "node:stream";
import type { ErrorCode } from "../error-codes.ts";
import type { ErrorBody } from "./error-response.ts";

const answerFor = (code: string | undefined): { status: string; code: ErrorCode; message: string } =>
  code === "HPE_HEADER_OVERFLOW"
    ? {
        status: "431 Request Header Fields Too Large",
        code: "headers_too_large",
        message: "The request line and headers are limited to 16 KiB.",
      }
    : code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? {
          status: "408 Request Timeout",
          code: "request_timeout",
          message: "The request took too long to arrive.",
        }
      : {
          status: "400 Bad Request",
          code: "request_malformed",
          message: "The HTTP request is malformed (e.g. a forbidden character in the URL or a header).",
        };

/** For `server.on("clientError", …)`. */
export const answerClientError = (error: Error & { readonly code?: string }, socket: Duplex): void => {
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const answer = answerFor(error.code);
  const body: ErrorBody = {
    error: { type: "invalid_request_error", code: answer.code, message: answer.message, param: null },
  };
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${answer.status}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
  );
};
