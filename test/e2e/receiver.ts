/** A real HTTP receiver on 127.0.0.1 for the webhook tests: records every request's raw bytes. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  readonly path: string;
  readonly headers: IncomingMessage["headers"];
  readonly raw: Buffer;
  readonly event: { id: string; type: string; created: number; livemode: boolean; data: { object: unknown } };
  readonly at: number;
}

export type Answer =
  | {
      status: number;
      body?: string;
      headers?: Record<string, string>;
      delayMs?: number;
      /** Answered only once this settles (a gate the test opens on a condition it observes). */
      until?: Promise<void>;
    }
  | "hang";

export const startReceiver = async (
  answer: (request: Received, index: number) => Answer = () => ({ status: 200 }),
) => {
  const received: Received[] = [];
  /** When each request left hanging was given up by its sender (its connection closed unanswered). */
  const abandoned: number[] = [];
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      let event: Received["event"];
      try {
        event = JSON.parse(raw.toString("utf8"));
      } catch {
        event = { id: "", type: "", created: 0, livemode: false, data: { object: null } };
      }
      const request: Received = { path: req.url ?? "", headers: req.headers, raw, event, at: Date.now() };
      received.push(request);
      const reply = answer(request, received.length - 1);
      if (reply === "hang") {
        open.add(res);
        res.once("close", () => {
          if (open.delete(res)) abandoned.push(Date.now());
        });
        return;
      }
      const send = () => {
        res.writeHead(reply.status, { "content-type": "text/plain", ...reply.headers });
        res.end(reply.body ?? "ok");
      };
      if (reply.until) void reply.until.then(send);
      else if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    abandoned,
    ids: () => new Set(received.map((r) => r.event.id)),
    close: () =>
      new Promise<void>((resolve) => {
        const closing = [...open];
        open.clear();
        for (const res of closing) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};
