/**
 * The chain-head cache (service/chains/chain-heads.ts) on the Effect TestClock, over a chain whose RPC
 * the test answers: a head is used while it is younger than `maxAgeMillis` and no longer, the poll keeps
 * a quiet chain's head young, an unreachable chain fails the caller once its head is too old, a head
 * the node reports is taken even when lower (a reorg to a shorter chain, a restarted dev chain), and a
 * live `newHeads` subscription makes the poll rare.
 */
import { createHash } from "node:crypto";
import { type AddressInfo, createServer } from "node:net";
import { describe, expect, it } from "@effect/vitest";
import { type Context, Duration, Effect, Layer } from "effect";
import { TestClock } from "effect/testing";
import { WebSocketServer } from "ws";
import { waitFor } from "../../scripts/stack/wait.ts";
import { ChainClients, ChainUnavailable } from "../../service/chains/chain-clients.ts";
import { ChainHeads, type ChainHeadsOptions } from "../../service/chains/chain-heads.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { ChainRegistry } from "../../service/chains/registry.ts";

const CHAIN: ResolvedChain = {
  id: 31337,
  name: "Test chain",
  livemode: false,
  rpc: { http: ["http://127.0.0.1:9"] },
  escrow: { address: "0x00000000000000000000000000000000000e5c20", start_block: 0 },
  tokens: [],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: false,
  hold_seconds: 0,
  confirmations: 0,
};

/** The node's answer to "latest block", and how often it was asked. */
interface Node {
  head: { number: bigint; timestamp: number };
  up: boolean;
  asked: number;
}

const nodeClients = (node: Node) =>
  Layer.succeed(ChainClients, {
    client: () => {
      throw new Error("no RPC client in this test");
    },
    latestBlock: (chain) =>
      Effect.suspend(() => {
        node.asked += 1;
        return node.up
          ? Effect.succeed(node.head)
          : Effect.fail(new ChainUnavailable({ chainId: chain.id, message: "down" }));
      }),
    latestTime: () => Effect.die("latestTime is not the cache's source"),
    simulateEscrow: () => Effect.die("unused"),
    measureEscrow: () => Effect.die("unused"),
    measureCall: () => Effect.die("unused"),
    simulateOutcome: () => Effect.die("unused"),
    rpc: () => Effect.die("unused"),
    rpcUrls: () => [],
  });

const withHeads = <A, E>(
  node: Node,
  options: ChainHeadsOptions,
  f: (heads: Context.Service.Shape<typeof ChainHeads>) => Effect.Effect<A, E>,
) =>
  Effect.gen(function* () {
    return yield* f(yield* ChainHeads);
  }).pipe(
    Effect.provide(
      ChainHeads.layer(options).pipe(
        Layer.provide(Layer.mergeAll(ChainRegistry.fromChains([CHAIN]), nodeClients(node))),
      ),
    ),
  );

/**
 * A node on loopback that accepts a WebSocket and then never answers (a stalled node): `asked` resolves
 * once the client has sent its first frame (the subscription request).
 */
const silentWebSocketNode = async () => {
  let heard: () => void = () => {};
  const asked = new Promise<void>((resolve) => {
    heard = resolve;
  });
  const server = createServer((socket) => {
    socket.once("data", (request) => {
      const key = /sec-websocket-key:\s*(\S+)/i.exec(request.toString())?.[1] ?? "";
      const accept = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
      );
      socket.once("data", () => heard());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked,
    close: () => {
      server.close();
      if ("closeAllConnections" in server)
        (server as { closeAllConnections: () => void }).closeAllConnections();
    },
  };
};

/** A node's WebSocket that takes `newHeads` subscriptions and sends each head `send` is given. */
const headsNode = async () => {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const subscribers = new Set<import("ws").WebSocket>();
  server.on("connection", (socket) => {
    socket.on("message", (data) => {
      const request = JSON.parse(data.toString()) as { id: number; method: string };
      if (request.method === "eth_subscribe") {
        socket.send(JSON.stringify({ jsonrpc: "2.0", id: request.id, result: "0xabc" }));
        subscribers.add(socket);
      } else socket.send(JSON.stringify({ jsonrpc: "2.0", id: request.id, result: "0x1" }));
    });
  });
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    subscribed: () => subscribers.size > 0,
    send: (number: bigint, timestamp: number) => {
      for (const socket of subscribers)
        socket.send(
          JSON.stringify({
            jsonrpc: "2.0",
            method: "eth_subscription",
            params: {
              subscription: "0xabc",
              result: { number: `0x${number.toString(16)}`, timestamp: `0x${timestamp.toString(16)}` },
            },
          }),
        );
    },
    close: () => {
      for (const socket of server.clients) socket.terminate();
      server.close();
    },
  };
};

const newNode = (): Node => ({ head: { number: 10n, timestamp: 1_000 }, up: true, asked: 0 });

describe("chain heads", () => {
  it.effect("answers from the head while it is younger than maxAge, then reads the chain", () =>
    Effect.gen(function* () {
      const node = newNode();
      yield* withHeads(node, { pollEveryMillis: 60_000, maxAgeMillis: 2_000 }, (heads) =>
        Effect.gen(function* () {
          yield* Effect.yieldNow; // the poll's first read, at start
          expect(node.asked).toBe(1);
          node.head = { number: 11n, timestamp: 1_012 };
          expect(yield* heads.latestTime(CHAIN)).toBe(1_000);
          yield* TestClock.adjust(Duration.millis(1_999));
          expect(yield* heads.latestTime(CHAIN)).toBe(1_000);
          expect(node.asked).toBe(1);
          yield* TestClock.adjust(Duration.millis(1));
          expect(yield* heads.latestTime(CHAIN)).toBe(1_012);
          expect(node.asked).toBe(2);
          expect(yield* heads.latestBlock(CHAIN)).toEqual({ number: 11n, timestamp: 1_012 });
          expect(node.asked).toBe(2);
        }),
      );
    }),
  );

  it.effect("the poll keeps a quiet chain's head young: no read on the caller's path", () =>
    Effect.gen(function* () {
      const node = newNode();
      yield* withHeads(node, { pollEveryMillis: 1_000, maxAgeMillis: 2_000 }, (heads) =>
        Effect.gen(function* () {
          for (let second = 1; second <= 10; second++) {
            node.head = { number: 10n + BigInt(second), timestamp: 1_000 + second };
            yield* TestClock.adjust(Duration.seconds(1));
          }
          const asked = node.asked;
          expect(asked).toBeGreaterThanOrEqual(10);
          expect(yield* heads.latestTime(CHAIN)).toBe(1_010);
          expect(node.asked).toBe(asked);
        }),
      );
    }),
  );

  it.effect("an unreachable chain fails the caller once the head is maxAge old", () =>
    Effect.gen(function* () {
      const node = newNode();
      yield* withHeads(node, { pollEveryMillis: 1_000, maxAgeMillis: 2_000 }, (heads) =>
        Effect.gen(function* () {
          yield* Effect.yieldNow;
          node.up = false;
          yield* TestClock.adjust(Duration.millis(1_500));
          expect(yield* heads.latestTime(CHAIN)).toBe(1_000);
          yield* TestClock.adjust(Duration.millis(500));
          const failed = yield* Effect.flip(heads.latestTime(CHAIN));
          expect(failed).toBeInstanceOf(ChainUnavailable);
          node.up = true;
          expect(yield* heads.latestTime(CHAIN)).toBe(1_000);
        }),
      );
    }),
  );

  it.effect("takes the node's head even when lower, and refresh reads the chain at once", () =>
    Effect.gen(function* () {
      const node = newNode();
      yield* withHeads(node, { pollEveryMillis: 60_000, maxAgeMillis: 60_000 }, (heads) =>
        Effect.gen(function* () {
          yield* Effect.yieldNow;
          node.head = { number: 5n, timestamp: 900 };
          expect(yield* heads.latestTime(CHAIN)).toBe(1_000);
          expect(yield* heads.refresh(CHAIN)).toEqual({ number: 5n, timestamp: 900 });
          expect(yield* heads.latestTime(CHAIN)).toBe(900);
        }),
      );
    }),
  );

  it.effect("maxAge 0 reads the chain on every call", () =>
    Effect.gen(function* () {
      const node = newNode();
      yield* withHeads(node, { pollEveryMillis: 60_000, maxAgeMillis: 0 }, (heads) =>
        Effect.gen(function* () {
          yield* Effect.yieldNow;
          const asked = node.asked;
          node.head = { number: 11n, timestamp: 1_001 };
          expect(yield* heads.latestTime(CHAIN)).toBe(1_001);
          expect(yield* heads.latestTime(CHAIN)).toBe(1_001);
          expect(node.asked).toBe(asked + 2);
        }),
      );
    }),
  );

  it.live(
    "a node that takes the socket but never answers the subscription holds up no shutdown",
    () =>
      Effect.gen(function* () {
        const silent = yield* Effect.acquireRelease(Effect.promise(silentWebSocketNode), (node) =>
          Effect.sync(node.close),
        );
        const chain: ResolvedChain = { ...CHAIN, rpc: { ...CHAIN.rpc, ws: silent.url } };
        const layer = ChainHeads.layer({ pollEveryMillis: 60_000, maxAgeMillis: 2_000 }).pipe(
          Layer.provide(Layer.mergeAll(ChainRegistry.fromChains([chain]), nodeClients(newNode()))),
        );
        const closing = yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Layer.build(layer);
            yield* Effect.promise(() => silent.asked);
            return Date.now();
          }),
        );
        expect(Date.now() - closing).toBeLessThan(2_500);
      }),
    10_000,
  );

  it.effect("a live subscription: heads from it, and a poll only every subscribedPollEveryMillis", () =>
    Effect.gen(function* () {
      const ws = yield* Effect.acquireRelease(Effect.promise(headsNode), (node) => Effect.sync(node.close));
      const node = newNode();
      const chain: ResolvedChain = { ...CHAIN, rpc: { ...CHAIN.rpc, ws: ws.url } };
      const options = { pollEveryMillis: 1_000, maxAgeMillis: 2_000, subscribedPollEveryMillis: 15_000 };
      yield* Effect.gen(function* () {
        const heads = yield* ChainHeads;
        yield* Effect.promise(() =>
          waitFor(async () => ws.subscribed(), { timeoutMs: 5_000, what: "a subscription" }),
        );
        ws.send(12n, 1_024);
        yield* Effect.promise(() =>
          waitFor(async () => (await Effect.runPromise(heads.latestTime(chain))) === 1_024, {
            timeoutMs: 5_000,
            intervalMs: 10,
            what: "the subscribed head",
          }),
        );
        const asked = node.asked;
        // A quiet chain (no block for 10 s): no poll, and the head is still "now".
        for (let second = 1; second <= 10; second++) yield* TestClock.adjust(Duration.seconds(1));
        expect(node.asked).toBe(asked);
        expect(yield* heads.latestTime(chain)).toBe(1_024);
        yield* TestClock.adjust(Duration.seconds(6));
        expect(node.asked).toBe(asked + 1);
      }).pipe(
        Effect.provide(
          ChainHeads.layer(options).pipe(
            Layer.provide(Layer.mergeAll(ChainRegistry.fromChains([chain]), nodeClients(node))),
          ),
        ),
      );
    }),
  );
});
