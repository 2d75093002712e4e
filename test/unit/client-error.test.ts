import { createServer } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { answerClientError } from "../../service/http/client-error.ts";

const server = createServer((_request, response) => response.end("ok"));
server.on("clientError", answerClientError);
let port = 0;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  port = (server.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const raw = (head: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(Buffer.from(head, "latin1")));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });

it("answers a request Node's parser refuses in the error shape", async () => {
  for (const head of [
    "GET /v1/chains HTTP/1.1\r\nhost: x\r\nauthorization: Bearer a\u0000b\r\n\r\n",
    "GET /v1/chains\u0000 HTTP/1.1\r\nhost: x\r\n\r\n",
    "NOT HTTP\r\n\r\n",
  ]) {
    const answer = await raw(head);
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
    expect(body).toEqual({
      error: {
        type: "invalid_request_error",
        code: "request_malformed",
        message: expect.any(String),
        param: null,
      },
    });
  }
  const long = await raw(`GET /${"x".repeat(20_000)} HTTP/1.1\r\nhost: x\r\n\r\n`);
  expect(long).toMatch(/^HTTP\/1\.1 431 /);
  expect(JSON.parse(long.slice(long.indexOf("\r\n\r\n") + 4)).error.code).toBe("headers_too_large");
});
