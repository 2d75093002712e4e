/**
 * A chain's transport over several URLs (service/chains/rpc-transport.ts), against JSON-RPC nodes the
 * test answers on loopback: the chain's call rate, a URL whose head lags set aside and taken back (and
 * never used before the first heads are known, however slow), the
 * next URL after a failure but not after a revert, and a 429 retried after its `Retry-After`.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { createPublicClient } from "viem";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { type ChainTransport, chainTransport } from "../../service/chains/rpc-transport.ts";

interface FakeNode {
  readonly url: string;
  head: number;
  /** How long it takes to answer (a provider's slow moment). */
  delayMs: number;
  /** Answers to give before the normal ones: an HTTP status with headers, or a JSON-RPC error. */
  readonly queued: Array<
    { status: number; headers?: Record<string, string> } | { rpcError: string; code?: number }
  >;
  /** Calls answered, by method, with their arrival times. */
  readonly calls: Array<{ method: string; at: number }>;
  readonly close: () => Promise<void>;
}

const body = (request: IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    let text = "";
    request.on("data", (chunk: Buffer) => {
      text += chunk.toString();
    });
    request.on("end", () => resolve(text));
  });

const fakeNode = async (head: number): Promise<FakeNode> => {
  const node: Omit<FakeNode, "url" | "close"> = { head, delayMs: 0, queued: [], calls: [] };
  const server = createServer(async (request, response) => {
    if (node.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, node.delayMs));
    const parsed = JSON.parse(await body(request)) as
      | { id: number; method: string }
      | Array<{ id: number; method: string }>;
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    const next = node.queued.shift();
    if (next !== undefined && "status" in next) {
      response.writeHead(next.status, next.headers ?? {}).end("{}");
      return;
    }
    const answers = calls.map((call) => {
      node.calls.push({ method: call.method, at: performance.now() });
      if (next !== undefined && "rpcError" in next)
        return {
          jsonrpc: "2.0",
          id: call.id,
          error: { code: next.code ?? 3, message: next.rpcError, data: "0x" },
        };
      const result = call.method === "eth_blockNumber" ? `0x${node.head.toString(16)}` : "0x1";
      return { jsonrpc: "2.0", id: call.id, result };
    });
    response
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(node, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
};

const chainOn = (urls: string[], rpc: Partial<ResolvedChain["rpc"]> = {}): ResolvedChain => ({
  id: 8453,
  name: "Test chain",
  livemode: true,
  rpc: { http: urls as [string, ...string[]], batch_size: 0, ...rpc },
  escrow: { address: "0x00000000000000000000000000000000000e5c20", start_block: 0 },
  tokens: [],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: false,
  hold_seconds: 0,
  confirmations: 0,
});

const open: Array<FakeNode | ChainTransport> = [];
afterEach(async () => {
  for (const each of open.splice(0)) "stop" in each ? each.stop() : await each.close();
});

const nodes = async (...heads: number[]) => {
  const made = await Promise.all(heads.map(fakeNode));
  open.push(...made);
  return made;
};

const clientOf = (chain: ResolvedChain, probeEveryMs = 50) => {
  const transport = chainTransport(chain, { probeEveryMs });
  open.push(transport);
  return { transport, client: createPublicClient({ transport: transport.transport }) };
};

const calls = (node: FakeNode, method = "eth_chainId") =>
  node.calls.filter((c) => c.method === method).length;

describe("a chain's RPC transport", () => {
  it("keeps to the chain's calls per second (a token bucket of one second)", async () => {
    const [node] = await nodes(1);
    if (!node) throw new Error("no node");
    const { client } = clientOf(chainOn([node.url], { requests_per_second: 10 }));
    const started = performance.now();
    await Promise.all(Array.from({ length: 25 }, () => client.request({ method: "eth_chainId" })));
    // 10 at once, then 10 a second: the 25th call waits about 1.5 s.
    expect(performance.now() - started).toBeGreaterThan(1_300);
    const arrivals = node.calls.map((c) => c.at - started);
    expect(arrivals.filter((at) => at < 900).length).toBeLessThanOrEqual(20);
  });

  it("sets aside a URL whose head trails the best by more than max_lag_blocks, and takes it back", async () => {
    const [lagging, healthy] = await nodes(100, 130);
    if (!lagging || !healthy) throw new Error("no nodes");
    const { client, transport } = clientOf(chainOn([lagging.url, healthy.url], { max_lag_blocks: 3 }));
    for (let i = 0; i < 5; i++) await client.request({ method: "eth_chainId" });
    expect(calls(lagging)).toBe(0);
    expect(calls(healthy)).toBe(5);
    expect(transport.nodes().map((n) => n.lagging)).toEqual([true, false]);
    lagging.head = 128;
    await waitFor(async () => transport.nodes()[0]?.lagging === false, {
      timeoutMs: 5_000,
      intervalMs: 10,
      what: "the lagging URL to catch up",
    });
    await client.request({ method: "eth_chainId" });
    expect(calls(lagging)).toBe(1);
  });

  it("answers the first calls from a URL known to be up to date, even when the healthy one's first head is slow", async () => {
    const [lagging, healthy] = await nodes(100, 130);
    if (!lagging || !healthy) throw new Error("no nodes");
    // The healthy provider takes 3 s to answer (a spike, a rate limit's Retry-After) as the process starts.
    healthy.delayMs = 3_000;
    const { client, transport } = clientOf(
      chainOn([lagging.url, healthy.url], { max_lag_blocks: 3 }),
      60_000,
    );
    expect(await client.request({ method: "eth_chainId" })).toBe("0x1");
    expect(calls(lagging)).toBe(0);
    expect(calls(healthy)).toBe(1);
    expect(transport.nodes().map((n) => n.lagging)).toEqual([true, false]);
  });

  it("moves to the next URL when one fails, but a revert is the answer", async () => {
    const [failing, healthy] = await nodes(10, 10);
    if (!failing || !healthy) throw new Error("no nodes");
    const { client } = clientOf(chainOn([failing.url, healthy.url]), 60_000);
    failing.queued.push({ status: 503 }, { status: 503 }, { status: 503 });
    expect(await client.request({ method: "eth_chainId" })).toBe("0x1");
    expect(calls(healthy)).toBe(1);
    // The failed URL now goes last; the healthy one answers a revert, which is not tried elsewhere.
    healthy.queued.push({ rpcError: "execution reverted" });
    await expect(client.request({ method: "eth_call", params: [{}, "latest"] } as never)).rejects.toThrow(
      /reverted/,
    );
    expect(calls(failing, "eth_call")).toBe(0);
  });

  it("tries the next URL for a call one node refuses, and keeps the node first", async () => {
    const [refusing, other] = await nodes(10, 10);
    if (!refusing || !other) throw new Error("no nodes");
    const { client, transport } = clientOf(chainOn([refusing.url, other.url]), 60_000);
    await client.request({ method: "eth_chainId" }); // after the first heads
    refusing.queued.push({ rpcError: "the method eth_chainId does not exist", code: -32601 });
    expect(await client.request({ method: "eth_chainId" })).toBe("0x1");
    expect(calls(other)).toBe(1);
    expect(transport.nodes()[0]?.failing).toBe(false);
    await client.request({ method: "eth_chainId" });
    expect(calls(refusing)).toBe(3);
  });

  it("waits out a 429's Retry-After on the same URL", async () => {
    const [limited, other] = await nodes(10, 10);
    if (!limited || !other) throw new Error("no nodes");
    const { client } = clientOf(chainOn([limited.url, other.url]), 60_000);
    await client.request({ method: "eth_chainId" });
    limited.queued.push({ status: 429, headers: { "retry-after": "1" } });
    const started = performance.now();
    expect(await client.request({ method: "eth_chainId" })).toBe("0x1");
    expect(performance.now() - started).toBeGreaterThan(900);
    expect(calls(limited)).toBe(2);
    expect(calls(other)).toBe(0);
  });
});
