/**
 * The service's JSON-RPC `fetch` (undici's `request` under viem's HTTP transport): answers, batches,
 * HTTP errors, the size cap and the time limit, against a local server.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import {
  BaseError,
  createPublicClient,
  HttpRequestError,
  http,
  ResponseBodyTooLargeError,
  TimeoutError,
} from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchOver } from "../../service/chains/rpc-fetch.ts";

interface RpcCall {
  readonly id: number;
  readonly method: string;
}

const requests: { url: string | undefined; body: unknown }[] = [];
let closedEarly = 0;

const answer = (call: RpcCall) =>
  call.method === "eth_chainId"
    ? { jsonrpc: "2.0", id: call.id, result: "0x7a69" }
    : call.method === "eth_blockNumber"
      ? { jsonrpc: "2.0", id: call.id, result: "0x10" }
      : { jsonrpc: "2.0", id: call.id, error: { code: -32601, message: "method not found" } };

const handle = async (request: IncomingMessage, response: ServerResponse) => {
  let text = "";
  for await (const chunk of request) text += chunk;
  const body = text === "" ? null : (JSON.parse(text) as RpcCall | RpcCall[]);
  requests.push({ url: request.url, body });
  switch (request.url) {
    case "/rpc":
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify(Array.isArray(body) ? body.map(answer) : answer(body as RpcCall)));
      return;
    case "/busy":
      response.statusCode = 429;
      response.setHeader("retry-after", "1");
      response.end("slow down");
      return;
    case "/empty":
      response.statusCode = 204;
      response.end();
      return;
    case "/huge":
      response.setHeader("content-type", "application/json");
      response.write("[");
      for (let i = 0; i < 64; i++) response.write(`${"1,".repeat(16_384)}`);
      response.end("1]");
      return;
    case "/never":
      response.on("close", () => {
        closedEarly++;
      });
      return;
  }
};

const server = createServer((request, response) => void handle(request, response));
const agent = new Agent({ keepAliveTimeout: 1_000 });
let base = "";

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const clientAt = (path: string, options: { batch?: boolean; timeout?: number } = {}) =>
  createPublicClient({
    transport: http(`${base}${path}`, {
      fetchFn: fetchOver(agent),
      maxResponseBodySize: false,
      retryCount: 0,
      timeout: options.timeout ?? 5_000,
      batch: options.batch ? { batchSize: 10 } : false,
    }),
  });

describe("JSON-RPC over undici's request", () => {
  it("answers single calls and batches, a batch in one HTTP request", async () => {
    expect(await clientAt("/rpc").getChainId()).toBe(31337);
    requests.length = 0;
    const batched = clientAt("/rpc", { batch: true });
    const [chainId, block] = await Promise.all([batched.getChainId(), batched.getBlockNumber()]);
    expect([chainId, block]).toEqual([31337, 16n]);
    expect(requests).toHaveLength(1);
    expect(requests[0]?.body).toMatchObject([{ method: "eth_chainId" }, { method: "eth_blockNumber" }]);
  });

  it("passes on an HTTP error with its status and headers", async () => {
    const error = await clientAt("/busy")
      .getChainId()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BaseError);
    const failed = (error as BaseError).walk((e) => e instanceof HttpRequestError) as HttpRequestError | null;
    expect(failed?.status).toBe(429);
    expect(failed?.headers?.get("Retry-After")).toBe("1");
  });

  it("gives a bodiless status a bodiless response", async () => {
    const response = await fetchOver(agent)(`${base}/empty`, { method: "POST", body: "{}" });
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
  });

  it("stops reading an answer over the cap", async () => {
    const error = await fetchOver(agent, 100_000)(`${base}/huge`, { method: "POST", body: "{}" }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ResponseBodyTooLargeError);
  });

  it("gives up at viem's time limit and closes the request", async () => {
    const error = await clientAt("/never", { timeout: 200 })
      .getChainId()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TimeoutError);
    await expect.poll(() => closedEarly, { timeout: 2_000 }).toBe(1);
  });
});
