/**
 * A JSON-RPC proxy of our own in front of a local node (anvil), on loopback only. It counts what passes
 * (HTTP requests, JSON-RPC calls by method and by client) and, when asked, misbehaves the way hosted RPC
 * providers do: 429 with `Retry-After` above a rate, `eth_getLogs` refused above a block range or a result
 * count (with Alchemy's message, which viem users and Ponder's retry helper parse), latency spikes, a
 * WebSocket that drops every so often, and a node that serves the chain as it was some blocks ago.
 *
 * The lagging node is a view of the same anvil: every "latest" or "pending" becomes the lagged head,
 * blocks, receipts and logs above it do not exist yet, and a transaction mined above it is pending. A
 * transaction sent to it is passed on (a lagging node still gossips what it receives).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocket, WebSocketServer } from "ws";

export interface ProxyFaults {
  /** JSON-RPC calls per second above which requests get 429 with `Retry-After` (undefined: no limit). */
  readonly callsPerSecond?: number;
  readonly retryAfterSeconds?: number;
  /** `eth_getLogs` refused above this many blocks (inclusive range). */
  readonly getLogsMaxBlocks?: number;
  /** `eth_getLogs` refused when it would return more logs than this. */
  readonly getLogsMaxResults?: number;
  /** A share of HTTP requests (0-1) answered after a pause drawn from [minMs, maxMs]. */
  readonly latencySpikes?: { readonly share: number; readonly minMs: number; readonly maxMs: number };
  /** Every WebSocket connection is cut (without a closing handshake) this long after it opened. */
  readonly dropWebSocketAfterMs?: number;
  /** Serves the chain as it was this many blocks below the node's head. */
  readonly lagBlocks?: number;
}

export interface ProxyCounts {
  readonly httpRequests: number;
  readonly calls: number;
  readonly byMethod: Readonly<Record<string, number>>;
  /** Calls by client: the `label` option's name for the connection, or its `user-agent`. */
  readonly byClient: Readonly<Record<string, number>>;
  /** Calls by client, then by method. */
  readonly byClientMethod: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Calls sent over WebSocket connections (subscriptions), not counting notifications. */
  readonly wsCalls: number;
  readonly rateLimited: number;
  readonly getLogsRefused: number;
  readonly spikes: number;
  readonly wsDrops: number;
  /** Answers the lagging view changed (a lower head, a block or receipt not there yet). */
  readonly staleAnswers: number;
}

export interface RpcProxy {
  readonly http: string;
  readonly ws: string;
  readonly counts: () => ProxyCounts;
  readonly resetCounts: () => void;
  readonly stop: () => Promise<void>;
}

interface Call {
  readonly jsonrpc?: string;
  readonly id?: unknown;
  readonly method: string;
  readonly params?: unknown[];
}

type Answer = { jsonrpc: "2.0"; id: unknown; result?: unknown; error?: { code: number; message: string } };

const TAGS_TO_LAG = new Set(["latest", "pending", "safe", "finalized"]);
/** Methods whose last parameter (at this index) is a block tag or number. */
const BLOCK_PARAM: Readonly<Record<string, number>> = {
  eth_call: 1,
  eth_getBalance: 1,
  eth_getCode: 1,
  eth_getTransactionCount: 1,
  eth_getStorageAt: 2,
  eth_estimateGas: 1,
  eth_createAccessList: 1,
};

const hex = (n: bigint) => `0x${n.toString(16)}`;

const emptyCounts = () => ({
  httpRequests: 0,
  calls: 0,
  byMethod: {} as Record<string, number>,
  byClient: {} as Record<string, number>,
  byClientMethod: {} as Record<string, Record<string, number>>,
  wsCalls: 0,
  rateLimited: 0,
  getLogsRefused: 0,
  spikes: 0,
  wsDrops: 0,
  staleAnswers: 0,
});

const readBody = (request: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.once("error", reject);
  });

const listen = (server: Server): Promise<number> =>
  new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)),
  );

/** Starts a proxy in front of `upstream` (an anvil's HTTP and WebSocket URLs). */
export const startRpcProxy = async (
  upstream: { readonly http: string; readonly ws: string },
  faults: ProxyFaults = {},
  /** Names the client of a connection by its local port (the census tells processes apart by it). */
  label?: (remotePort: number) => string,
): Promise<RpcProxy> => {
  let counts = emptyCounts();
  let window = { second: 0, calls: 0 };

  const forward = async (calls: readonly Call[]): Promise<Answer[]> => {
    const response = await fetch(upstream.http, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(
        calls.map((call, i) => ({ jsonrpc: "2.0", id: i, method: call.method, params: call.params ?? [] })),
      ),
    });
    const answers = (await response.json()) as Answer[];
    return calls.map((call, i) => {
      const answer = answers.find((a) => a.id === i) ?? {
        jsonrpc: "2.0" as const,
        id: i,
        error: { code: -32603, message: "no answer" },
      };
      return { ...answer, id: call.id };
    });
  };
  const one = async (call: Call): Promise<Answer> => (await forward([call]))[0] as Answer;
  const result = async (method: string, params: unknown[]): Promise<unknown> => {
    const answer = await one({ method, params });
    if (answer.error) throw new Error(`${method}: ${answer.error.message}`);
    return answer.result;
  };

  const lagged = async (): Promise<bigint> => {
    const head = BigInt((await result("eth_blockNumber", [])) as string);
    const lag = BigInt(faults.lagBlocks ?? 0);
    return head > lag ? head - lag : 0n;
  };
  const numberOf = (tag: unknown, head: bigint): bigint =>
    typeof tag === "string" && tag.startsWith("0x") ? BigInt(tag) : tag === "earliest" ? 0n : head;
  const stale = <A>(value: A): A => {
    counts.staleAnswers++;
    return value;
  };
  const answerOf = (call: Call, value: unknown): Answer => ({ jsonrpc: "2.0", id: call.id, result: value });
  const errorOf = (call: Call, code: number, message: string): Answer => ({
    jsonrpc: "2.0",
    id: call.id,
    error: { code, message },
  });
  const blockNumberIn = (value: unknown) =>
    value !== null &&
    typeof value === "object" &&
    typeof (value as { blockNumber?: unknown }).blockNumber === "string"
      ? BigInt((value as { blockNumber: string }).blockNumber)
      : undefined;

  /** The call as a node `lagBlocks` behind would answer it. */
  const laggedCall = async (call: Call): Promise<Answer> => {
    const head = await lagged();
    const params = [...(call.params ?? [])];
    switch (call.method) {
      case "eth_blockNumber":
        return stale(answerOf(call, hex(head)));
      case "eth_getBlockByNumber": {
        const tag = params[0];
        if (typeof tag === "string" && TAGS_TO_LAG.has(tag)) {
          const upstreamAnswer = await one({ ...call, params: [tag, ...params.slice(1)] });
          const number = (upstreamAnswer.result as { number?: string } | null)?.number;
          if (number !== undefined && BigInt(number) <= head) return upstreamAnswer;
          return stale(await one({ ...call, params: [hex(head), ...params.slice(1)] }));
        }
        if (numberOf(tag, head) > head) return stale(answerOf(call, null));
        return one(call);
      }
      case "eth_getBlockByHash": {
        const answer = await one(call);
        const number = (answer.result as { number?: string } | null)?.number;
        return number !== undefined && BigInt(number) > head ? stale(answerOf(call, null)) : answer;
      }
      case "eth_getTransactionReceipt": {
        const answer = await one(call);
        const number = blockNumberIn(answer.result);
        return number !== undefined && number > head ? stale(answerOf(call, null)) : answer;
      }
      case "eth_getTransactionByHash": {
        const answer = await one(call);
        const number = blockNumberIn(answer.result);
        if (number === undefined || number <= head) return answer;
        return stale(
          answerOf(call, {
            ...(answer.result as object),
            blockHash: null,
            blockNumber: null,
            transactionIndex: null,
          }),
        );
      }
      case "eth_getLogs": {
        const filter = { ...(params[0] as Record<string, unknown>) };
        if (typeof filter.blockHash === "string") {
          const block = (await result("eth_getBlockByHash", [filter.blockHash, false])) as {
            number: string;
          } | null;
          if (block === null || BigInt(block.number) > head)
            return stale(errorOf(call, -32000, `unknown block ${filter.blockHash}`));
          return one(call);
        }
        const from = numberOf(filter.fromBlock ?? "latest", head);
        const to = numberOf(filter.toBlock ?? "latest", head);
        if (from > head) return stale(answerOf(call, []));
        if (to > head || typeof filter.toBlock !== "string" || !filter.toBlock.startsWith("0x")) {
          counts.staleAnswers++;
          if (to > head) filter.toBlock = hex(head);
          else filter.toBlock = hex(to);
        }
        filter.fromBlock = hex(from);
        return one({ ...call, params: [filter] });
      }
      case "eth_feeHistory": {
        const newest = params[1];
        if (typeof newest === "string" && TAGS_TO_LAG.has(newest)) params[1] = hex(head);
        return one({ ...call, params });
      }
      default: {
        const at = BLOCK_PARAM[call.method];
        if (at === undefined) return one(call);
        const tag = params[at];
        if (tag === undefined || (typeof tag === "string" && TAGS_TO_LAG.has(tag))) {
          params[at] = hex(head);
          counts.staleAnswers++;
        } else if (numberOf(tag, head) > head) return stale(errorOf(call, -32000, "header not found"));
        return one({ ...call, params });
      }
    }
  };

  /** Alchemy's answer to a range or a result count it will not serve, with a range that would work. */
  const getLogsRefusal = (call: Call, from: bigint, blocks: bigint): Answer => {
    counts.getLogsRefused++;
    return errorOf(
      call,
      -32602,
      `Log response size exceeded. You can make eth_getLogs requests with up to a ${faults.getLogsMaxBlocks ?? 2000} block range and no limit on the response size, or you can request any block range with a cap of ${faults.getLogsMaxResults ?? 10000} logs in the response. Based on your parameters, this block range should work: [${hex(from)}, ${hex(from + blocks - 1n)}]`,
    );
  };

  const getLogsLimited = async (call: Call, answer: () => Promise<Answer>): Promise<Answer> => {
    const filter = (call.params?.[0] ?? {}) as Record<string, unknown>;
    if (typeof filter.blockHash === "string") return answer();
    const head = BigInt((await result("eth_blockNumber", [])) as string);
    const from = numberOf(filter.fromBlock ?? "latest", head);
    const to = numberOf(filter.toBlock ?? "latest", head);
    const maxBlocks = faults.getLogsMaxBlocks;
    if (maxBlocks !== undefined && to - from + 1n > BigInt(maxBlocks))
      return getLogsRefusal(call, from, BigInt(maxBlocks));
    const answered = await answer();
    const maxResults = faults.getLogsMaxResults;
    if (maxResults !== undefined && Array.isArray(answered.result) && answered.result.length > maxResults) {
      const half = (to - from + 1n) / 2n;
      return getLogsRefusal(call, from, half > 0n ? half : 1n);
    }
    return answered;
  };

  const handle = (call: Call): Promise<Answer> => {
    const answer = () => (faults.lagBlocks ? laggedCall(call) : one(call));
    return call.method === "eth_getLogs" ? getLogsLimited(call, answer) : answer();
  };

  const overRate = (calls: number): boolean => {
    if (faults.callsPerSecond === undefined) return false;
    const second = Math.floor(Date.now() / 1000);
    if (window.second !== second) window = { second, calls: 0 };
    if (window.calls + calls > faults.callsPerSecond) return true;
    window.calls += calls;
    return false;
  };

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    void (async () => {
      const text = await readBody(request);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        response.writeHead(400).end();
        return;
      }
      const calls = (Array.isArray(parsed) ? parsed : [parsed]) as Call[];
      counts.httpRequests++;
      counts.calls += calls.length;
      const client =
        label?.(request.socket.remotePort ?? 0) ?? String(request.headers["user-agent"] ?? "none");
      counts.byClient[client] = (counts.byClient[client] ?? 0) + calls.length;
      const ofClient = counts.byClientMethod[client] ?? {};
      counts.byClientMethod[client] = ofClient;
      for (const call of calls) {
        counts.byMethod[call.method] = (counts.byMethod[call.method] ?? 0) + 1;
        ofClient[call.method] = (ofClient[call.method] ?? 0) + 1;
      }
      if (overRate(calls.length)) {
        counts.rateLimited++;
        response
          .writeHead(429, {
            "content-type": "application/json",
            "retry-after": String(faults.retryAfterSeconds ?? 1),
          })
          .end(
            JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: 429, message: "Too Many Requests" } }),
          );
        return;
      }
      const spikes = faults.latencySpikes;
      if (spikes !== undefined && Math.random() < spikes.share) {
        counts.spikes++;
        await new Promise((resolve) =>
          setTimeout(resolve, spikes.minMs + Math.random() * (spikes.maxMs - spikes.minMs)),
        );
      }
      const answers = await Promise.all(calls.map(handle));
      response
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
    })().catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(502).end(String(error));
    });
  });
  const httpPort = await listen(server);

  const sockets = new Set<WebSocket>();
  const wsServer = createServer();
  const wss = new WebSocketServer({ server: wsServer });
  wss.on("connection", (client) => {
    const node = new WebSocket(upstream.ws);
    sockets.add(client);
    sockets.add(node);
    const pending: string[] = [];
    const drop = () => {
      sockets.delete(client);
      sockets.delete(node);
      client.terminate();
      node.terminate();
    };
    const timer =
      faults.dropWebSocketAfterMs === undefined
        ? undefined
        : setTimeout(() => {
            counts.wsDrops++;
            drop();
          }, faults.dropWebSocketAfterMs);
    client.on("message", (data) => {
      const text = data.toString();
      try {
        const parsed = JSON.parse(text) as Call | Call[];
        counts.wsCalls += Array.isArray(parsed) ? parsed.length : 1;
      } catch {
        // passed on as it came
      }
      if (node.readyState === WebSocket.OPEN) node.send(text);
      else pending.push(text);
    });
    node.on("open", () => {
      for (const text of pending.splice(0)) node.send(text);
    });
    node.on("message", (data) => {
      if (client.readyState === WebSocket.OPEN) client.send(data.toString());
    });
    const end = () => {
      if (timer) clearTimeout(timer);
      drop();
    };
    client.on("close", end);
    client.on("error", end);
    node.on("close", end);
    node.on("error", end);
  });
  const wsPort = await listen(wsServer);

  return {
    http: `http://127.0.0.1:${httpPort}`,
    ws: `ws://127.0.0.1:${wsPort}`,
    counts: () => ({
      ...counts,
      byMethod: { ...counts.byMethod },
      byClient: { ...counts.byClient },
      byClientMethod: Object.fromEntries(
        Object.entries(counts.byClientMethod).map(([client, methods]) => [client, { ...methods }]),
      ),
    }),
    resetCounts: () => {
      counts = emptyCounts();
    },
    stop: async () => {
      for (const socket of sockets) socket.terminate();
      wss.close();
      server.closeAllConnections();
      wsServer.closeAllConnections();
      await Promise.all([
        new Promise((resolve) => server.close(resolve)),
        new Promise((resolve) => wsServer.close(resolve)),
      ]);
    },
  };
};
