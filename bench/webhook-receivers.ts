/**
 * The benchmark's receivers, in a process of their own (as a merchant's would be): M HTTP servers on
 * loopback that answer 200 at once and note, for each request, the time from `sent_at` in the body
 * (when the event entered the outbox, or when the bare loop queued the request) to its arrival.
 * Driven over IPC by bench/webhooks.ts.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

// Named so that bench/webhooks.ts can tell its CPU time from the inserter's (bench/process-cpu.ts).
process.title = "bench-receivers";
const count = Number(process.argv[2] ?? 4);
// `stages`: each arrival noted by receiver URL and event id too (bench/webhook-stages.ts).
const stages = process.argv[3] === "stages";
let receipts: Array<{ key: string; sentAt: number; receivedAt: number }> = [];
let latencies: number[] = [];
const seen = new Set<string>();
let duplicates = 0;

const ports: number[] = [];
for (let i = 0; i < count; i++) {
  const receiver = i;
  let url = "";
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        id: string;
        data: { object: { sent_at: number } };
      };
      latencies.push(Date.now() - body.data.object.sent_at);
      if (stages)
        receipts.push({
          key: `${url}|${body.id}`,
          sentAt: body.data.object.sent_at,
          receivedAt: performance.timeOrigin + performance.now(),
        });
      const key = `${receiver}|${body.id}`;
      if (seen.has(key)) duplicates++;
      else seen.add(key);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
    });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  ports.push((server.address() as AddressInfo).port);
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
}

process.on("message", (message: { type: string }) => {
  if (message.type === "reset") {
    latencies = [];
    receipts = [];
    seen.clear();
    duplicates = 0;
    process.send?.({ type: "reset" });
  }
  if (message.type === "count") process.send?.({ type: "count", count: latencies.length });
  if (message.type === "report") process.send?.({ type: "report", latencies, duplicates });
  if (message.type === "receipts") process.send?.({ type: "receipts", receipts });
  if (message.type === "exit") process.exit(0);
});
process.send?.({ type: "ready", ports });
