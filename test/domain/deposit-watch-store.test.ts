/**
 * What the deposit watcher reads and writes of the payments (payment-store.ts) on a real Postgres: the
 * tokens of the payments watched now (a token whose payments are all past their watch, or on another
 * chain, is left out), the oldest watched payment's block, the watched deposit addresses while they are
 * few, the watched deposit addresses among a block's
 * recipients, and the replacement of a range read again, which drops what a reorg took out of watched
 * payments only.
 */
import { randomBytes } from "node:crypto";
import { expect, layer } from "@effect/vitest";
import { Effect, Layer } from "effect";
import { getAddress, type Hex } from "viem";
import { Merchants } from "../../service/merchants/merchants.ts";
import { type ObservedTransfer, PaymentStore } from "../../service/payments/payment-store.ts";
import { CHAIN, domainTestLayer, fakeChain, freshDatabase } from "./harness.ts";

const NOW = Date.UTC(2031, 5, 1, 12) / 1000;
const chain = fakeChain(NOW);
const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("deposit_watch"), chain)),
);

const address = (): Hex => `0x${randomBytes(20).toString("hex")}`;
const hash = (): string => `0x${randomBytes(32).toString("hex")}`;

/** A payment of `token` on `chainId`, watched until `watchUntil`, created in block `createdBlock`. */
const payment = (token: Hex, watchUntil: number, createdBlock: bigint, chainId = CHAIN.id) =>
  Effect.gen(function* () {
    const merchant = yield* (yield* Merchants).create("Shop");
    return yield* (yield* PaymentStore).insert({
      scope: { merchantId: merchant.id, livemode: false },
      chainId,
      token,
      payee: address(),
      operator: address(),
      holdSeconds: 0,
      onchainId: hash() as Hex,
      depositAddress: address(),
      amount: 1_000_000n,
      reference: null,
      description: null,
      expiresAt: watchUntil - 604_800,
      watchUntil,
      createdBlock,
    });
  });

const transfer = (paymentId: string, blockNumber: bigint): ObservedTransfer => ({
  chainId: CHAIN.id,
  paymentId,
  txHash: hash(),
  logIndex: 0,
  from: address(),
  amount: 1n,
  blockNumber,
  blockHash: hash(),
  timestamp: NOW,
});

layer(testLayer, { timeout: "60 seconds" })("the deposit watcher's reads of the payments", (it) => {
  it.effect("names the tokens of the payments watched now, and the block of the oldest of them", () =>
    Effect.gen(function* () {
      const store = yield* PaymentStore;
      const [a, b, c, d] = [address(), address(), address(), address()];
      yield* payment(a, NOW + 100, 30n);
      yield* payment(a, NOW - 100, 5n);
      yield* payment(b, NOW - 100, 4n);
      yield* payment(b, NOW - 1, 6n);
      yield* payment(c, NOW, 20n);
      yield* payment(d, NOW + 100, 1n, CHAIN.id + 1);
      const tokens = yield* store.watchedTokens(CHAIN.id, NOW);
      expect(tokens.map((t) => t.toLowerCase()).sort()).toEqual([a, c].sort());
      expect(yield* store.oldestWatchedBlock(CHAIN.id, NOW)).toBe(20n);
      expect(yield* store.watchedTokens(CHAIN.id, NOW + 101)).toEqual([]);
      expect(yield* store.oldestWatchedBlock(CHAIN.id, NOW + 101)).toBeUndefined();
      expect((yield* store.watchedTokens(CHAIN.id, NOW - 50)).map((t) => t.toLowerCase()).sort()).toEqual(
        [a, b, c].sort(),
      );
      expect(yield* store.oldestWatchedBlock(CHAIN.id, NOW - 50)).toBe(6n);
    }),
  );

  it.effect("lists the watched deposit addresses while there are at most so many, and says when more", () =>
    Effect.gen(function* () {
      const store = yield* PaymentStore;
      const chainId = CHAIN.id + 7; // a chain of this test's own
      const token = address();
      const watched = yield* Effect.forEach([1, 2, 3], () => payment(token, NOW + 100, 1n, chainId));
      yield* payment(token, NOW - 100, 1n, chainId);
      const few = yield* store.watchedAddressesUpTo(chainId, NOW, 3);
      expect(few?.map((a) => a.toLowerCase()).sort()).toEqual(
        watched.map((p) => p.deposit_address.toLowerCase()).sort(),
      );
      expect(yield* store.watchedAddressesUpTo(chainId, NOW, 2)).toBeUndefined();
      expect(yield* store.watchedAddressesUpTo(chainId, NOW + 101, 2)).toEqual([]);
    }),
  );

  it.effect("finds the watched deposit addresses among the recipients, with their token", () =>
    Effect.gen(function* () {
      const store = yield* PaymentStore;
      const token = address();
      const watched = yield* payment(token, NOW + 100, 1n);
      const over = yield* payment(token, NOW - 100, 1n);
      const found = yield* store.watchedAt(
        CHAIN.id,
        [watched.deposit_address, over.deposit_address, address()],
        NOW,
      );
      expect(found).toEqual([{ id: watched.id, address: watched.deposit_address, token: getAddress(token) }]);
      expect(yield* store.watchedAt(CHAIN.id, [], NOW)).toEqual([]);
    }),
  );

  it.effect(
    "replaces a range read again: a watched payment's transfer no longer there goes, others stay",
    () =>
      Effect.gen(function* () {
        const store = yield* PaymentStore;
        const token = address();
        const watched = yield* payment(token, NOW + 100, 1n);
        const ended = yield* payment(token, NOW - 100, 1n);
        const [gone, kept] = [transfer(watched.id, 10_100n), transfer(watched.id, 10_105n)];
        const earlier = transfer(ended.id, 10_101n);
        const added = yield* store.replaceTransfers(CHAIN.id, NOW - 200, 10_099n, 10_105n, [
          gone,
          kept,
          earlier,
        ]);
        expect([...added].sort()).toEqual([watched.id, ended.id].sort());
        // Read again at NOW: the reorg took `gone` out; `ended` is no longer watched, so what it had stays.
        const changed = yield* store.replaceTransfers(CHAIN.id, NOW, 10_099n, 10_110n, [kept]);
        expect(changed).toEqual([watched.id]);
        const left = yield* store.transfersOf([watched.id, ended.id]);
        expect(left.map((t) => t.tx_hash).sort()).toEqual([kept.txHash, earlier.txHash].sort());
        expect(yield* store.replaceTransfers(CHAIN.id, NOW, 10_099n, 10_110n, [kept])).toEqual([]);
      }),
  );
});
