/**
 * The deposit watcher's reading of a provider's `eth_getLogs` refusal (servedRangeEnd in
 * service/payments/deposit-watcher.ts), on the error viem raises for a node on loopback that answers as
 * Alchemy does above 2,000 blocks or 10,000 logs: the range it names is taken, anything else is not a
 * refusal to narrow.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createPublicClient, http } from "viem";
import { afterAll, describe, expect, it } from "vitest";
import { servedRangeEnd } from "../../service/payments/deposit-watcher.ts";

let answer = "";
const server = createServer((request, response) => {
  let body = "";
  request.on("data", (chunk: Buffer) => {
    body += chunk.toString();
  });
  request.on("end", () => {
    const { id } = JSON.parse(body) as { id: number };
    response
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32602, message: answer } }));
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const client = createPublicClient({
  transport: http(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { retryCount: 0 }),
});

/** The error viem raises for `eth_getLogs` over [from, to] when the node answers `message`. */
const refusal = async (message: string, from: bigint, to: bigint) => {
  answer = message;
  return client.getLogs({ fromBlock: from, toBlock: to }).then(
    () => {
      throw new Error("the node answered");
    },
    (error: unknown) => error,
  );
};

const alchemy = (from: string, to: string) =>
  `Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters, this block range should work: [${from}, ${to}]`;

describe("an eth_getLogs refusal, read", () => {
  it("takes the range the provider names", async () => {
    const error = await refusal(alchemy("0x3e9", "0x7d0"), 1_001n, 3_500n);
    expect(servedRangeEnd(1_001n, 3_500n, error)).toBe(2_000n);
  });

  it("is no narrower range when the message names none, or one no narrower than asked", async () => {
    expect(servedRangeEnd(1_001n, 3_500n, await refusal("invalid params", 1_001n, 3_500n))).toBeUndefined();
    expect(
      servedRangeEnd(1_001n, 1_500n, await refusal(alchemy("0x3e9", "0x7d0"), 1_001n, 1_500n)),
    ).toBeUndefined();
  });
});
