/**
 * A JSON-RPC proxy (loopback only) in front of anvil that answers as some hosted OP-stack nodes do: it
 * refuses `eth_createAccessList` (JSON-RPC -32601, in single and batched requests alike) and adds the L1
 * data fee fields of an OP-stack receipt (`l1Fee`, `l1GasPrice`, `l1GasUsed`) to every receipt. It
 * counts the methods it was asked, so a test can show what the service asked for.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

interface Call {
  readonly id: unknown;
  readonly method: string;
}

export interface OpNodeProxy {
  readonly url: string;
  /** How many times each method was asked. */
  readonly asked: Map<string, number>;
  readonly close: () => Promise<void>;
}

const readBody = (request: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });

export const startOpNodeProxy = async (upstream: string, l1FeeWei: bigint): Promise<OpNodeProxy> => {
  const asked = new Map<string, number>();
  const answer = async (call: Call & Record<string, unknown>): Promise<unknown> => {
    asked.set(call.method, (asked.get(call.method) ?? 0) + 1);
    if (call.method === "eth_createAccessList")
      return {
        jsonrpc: "2.0",
        id: call.id,
        error: { code: -32601, message: "the method eth_createAccessList does not exist/is not available" },
      };
    const response = await fetch(upstream, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(call),
    });
    const body = (await response.json()) as { result?: unknown };
    if (
      call.method === "eth_getTransactionReceipt" &&
      body.result !== null &&
      typeof body.result === "object"
    )
      body.result = {
        ...body.result,
        l1Fee: `0x${l1FeeWei.toString(16)}`,
        l1GasPrice: "0x3b9aca00",
        l1GasUsed: "0x640",
      };
    return body;
  };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    void (async () => {
      try {
        const parsed = JSON.parse(await readBody(request)) as unknown;
        const result = Array.isArray(parsed)
          ? await Promise.all(parsed.map((call) => answer(call as Call & Record<string, unknown>)))
          : await answer(parsed as Call & Record<string, unknown>);
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify(result));
      } catch (error) {
        response.writeHead(500);
        response.end(String(error));
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    asked,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};
