/**
 * One-time payments on a real EVM (anvil): deposit addresses (CREATE2 clones of the escrow's collector),
 * sweeps with and without a hold, releases, returns, top-ups, the collector's guard, ether and stray
 * tokens at a deposit address, a token without return values, a hostile re-entering token, and the test
 * token's EIP-3009 transfer by authorization (how the hosted page pays a deposit address without gas).
 */
import fc from "fast-check";
import {
  type Abi,
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  keccak256,
  parseEventLogs,
  parseUnits,
  toHex,
  zeroAddress,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DepositCollectorAbi } from "../../abis/DepositCollector.ts";
import { MandateEscrowAbi, MandateEscrowBytecode } from "../../abis/MandateEscrow.ts";
import { NoReturnTokenAbi } from "../../abis/NoReturnToken.ts";
import { ReentrantTokenAbi } from "../../abis/ReentrantToken.ts";
import { TestWalletBytecode } from "../../abis/TestWallet.ts";
import { usdcAbi } from "../../scripts/stack/circle-usdc.ts";
import {
  collectorAddress,
  type DepositTerms,
  depositAddress,
  depositKey,
} from "../../service/payments/deposit-address.ts";
import {
  type Address,
  AUTHORIZATION_TYPES,
  type Authorization,
  accountAt,
  type Chain,
  type ReceiptOutcome,
  startChain,
} from "./harness.ts";

const operator = accountAt(1);
const payee = accountAt(2);
const payer = accountAt(3);
const stranger = accountAt(4);
const otherPayer = accountAt(5);
const refundTo = privateKeyToAccount(keccak256(toHex("payments refund address")));
const usd = (n: string) => parseUnits(n, 6);
const ETHER = 10n ** 18n;

let chain: Chain;
let paymentCounter = 1n;

beforeAll(async () => {
  chain = await startChain();
});
afterAll(async () => {
  await chain?.stop();
});

const failure = (name: string) => ({ ok: false, error: name });

const depositFor = (overrides: Partial<DepositTerms> = {}): DepositTerms => ({
  paymentId: keccak256(toHex(`payment ${paymentCounter++}`)),
  payee: payee.address,
  token: chain.usdc,
  operator: operator.address,
  holdSeconds: 0n,
  ...overrides,
});
const addressOf = (d: DepositTerms) => depositAddress(chain.escrow, d) as Address;

/** The token's ABI for reads and transfers (the no-return token's `transfer` returns nothing). */
const abiOf = (token: Hex): Abi => (token === chain.noReturn ? NoReturnTokenAbi : erc20Abi);
const balance = (token: Hex, who: Hex) => chain.read<bigint>(token, erc20Abi, "balanceOf", [who]);

/** The payer's side: a plain ERC-20 transfer to the deposit address. */
const pay = async (d: DepositTerms, amount: bigint, from = payer) => {
  await chain.mint(d.token, from.address, amount);
  const outcome = await chain.send(from, d.token, abiOf(d.token), "transfer", [addressOf(d), amount]);
  if (!outcome.ok) throw new Error(`transfer failed: ${outcome.error}`);
};

const sweep = (deposits: DepositTerms[], by = stranger) =>
  chain.sendForReceipt(by, chain.escrow, MandateEscrowAbi, "sweep", [deposits]);
const releasePayments = (deposits: DepositTerms[], by = stranger) =>
  chain.sendForReceipt(by, chain.escrow, MandateEscrowAbi, "releasePayments", [deposits]);
const returnPayment = (d: DepositTerms, to: Hex, by = operator) =>
  chain.sendForReceipt(by, chain.escrow, MandateEscrowAbi, "returnPayment", [d, to]);
const holdOf = async (d: DepositTerms) => {
  const [amount, releaseAt] = await chain.read<[bigint, bigint]>(
    chain.escrow,
    MandateEscrowAbi,
    "paymentHoldOf",
    [d],
  );
  return { amount, releaseAt: Number(releaseAt) };
};
const codeAt = async (address: Hex) => (await chain.publicClient.getCode({ address })) ?? "0x";

const receiptOf = (outcome: ReceiptOutcome) => {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.error}`);
  return outcome.receipt;
};
const eventsOf = <N extends "PaymentReceived" | "PaymentReleased" | "PaymentReturned">(
  outcome: ReceiptOutcome,
  eventName: N,
) => parseEventLogs({ abi: MandateEscrowAbi, logs: receiptOf(outcome).logs, eventName });
/** The one PaymentReceived of a sweep, its addresses normalised. */
const receivedOf = (outcome: ReceiptOutcome) => {
  const events = eventsOf(outcome, "PaymentReceived");
  expect(events).toHaveLength(1);
  const { args } = events[0] as (typeof events)[number];
  return { ...args, payee: getAddress(args.payee), depositAddress: getAddress(args.depositAddress) };
};
const expectedReceived = (d: DepositTerms, amount: bigint, releaseAt: number, held: bigint) => ({
  paymentId: d.paymentId,
  payee: getAddress(d.payee),
  depositAddress: getAddress(addressOf(d)),
  token: getAddress(d.token),
  amount,
  releaseAt: BigInt(releaseAt),
  held,
});
const reentrancySelector = keccak256(toHex("ReentrancyGuardReentrantCall()")).slice(0, 10) as Hex;

const hex = (bytes: number) =>
  fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => toHex(b) as Hex);

describe("MandateEscrow: deposit addresses", () => {
  it("computes the collector, deposit keys and deposit addresses off-chain exactly as the contract does", async () => {
    const collector = await chain.read<Address>(chain.escrow, MandateEscrowAbi, "collector");
    expect(collectorAddress(chain.escrow)).toBe(collector.toLowerCase());
    // Another escrow, deployed at another nonce of the deployer: its collector is still its own nonce 1.
    const second = await chain.deploy(MandateEscrowAbi, MandateEscrowBytecode);
    expect(collectorAddress(second)).toBe(
      (await chain.read<Address>(second, MandateEscrowAbi, "collector")).toLowerCase(),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          paymentId: hex(32),
          payee: hex(20),
          token: hex(20),
          operator: hex(20),
          holdSeconds: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        }),
        fc.constantFrom(chain.escrow, second),
        async (terms, escrow) => {
          expect(await chain.read<Hex>(escrow, MandateEscrowAbi, "depositKey", [terms])).toBe(
            depositKey(terms),
          );
          const onChain = await chain.read<Address>(escrow, MandateEscrowAbi, "depositAddress", [terms]);
          expect(depositAddress(escrow, terms)).toBe(onChain.toLowerCase());
        },
      ),
      { numRuns: 50 },
    );
  });

  it("binds the address to every term: another field gives another address, and the wrong terms move nothing", async () => {
    const d = depositFor({ holdSeconds: 60n });
    const variants: DepositTerms[] = [
      { ...d, paymentId: keccak256(toHex("another payment")) },
      { ...d, payee: stranger.address },
      { ...d, token: chain.noReturn },
      { ...d, operator: stranger.address },
      { ...d, holdSeconds: 0n },
      { ...d, holdSeconds: 61n },
    ];
    const addresses = [d, ...variants].map(addressOf);
    expect(new Set(addresses).size).toBe(addresses.length);
    for (const v of variants)
      expect(
        (await chain.read<Address>(chain.escrow, MandateEscrowAbi, "depositAddress", [v])).toLowerCase(),
      ).toBe(addressOf(v));

    await pay(d, usd("9"));
    const strangerBefore = await balance(chain.usdc, stranger.address);
    const swept = await sweep(variants);
    expect(eventsOf(swept, "PaymentReceived")).toEqual([]);
    expect(await balance(chain.usdc, addressOf(d))).toBe(usd("9"));
    expect(await balance(chain.usdc, stranger.address)).toBe(strangerBefore);
    expect(receivedOf(await sweep([d])).amount).toBe(usd("9"));
  });

  it("refuses terms without a payee, token or operator", async () => {
    for (const field of ["payee", "token", "operator"] as const)
      expect(await sweep([depositFor({ [field]: zeroAddress })])).toEqual(failure("InvalidTerms"));
  });
});

describe("MandateEscrow: sweeps", () => {
  it("sweeps a plain transfer straight to the payee, deploying the deposit address's clone on the first sweep", async () => {
    const d = depositFor();
    const deposit = addressOf(d);
    await pay(d, usd("12.34"));
    expect(await codeAt(deposit)).toBe("0x");
    const payeeBefore = await balance(chain.usdc, payee.address);
    const escrowBefore = await balance(chain.usdc, chain.escrow);
    const swept = await sweep([d]);
    expect(receivedOf(swept)).toEqual(expectedReceived(d, usd("12.34"), 0, 0n));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("12.34"));
    expect(await balance(chain.usdc, deposit)).toBe(0n);
    expect(await balance(chain.usdc, chain.escrow)).toBe(escrowBefore);
    expect(await holdOf(d)).toEqual({ amount: 0n, releaseAt: 0 });
    expect(await codeAt(deposit)).not.toBe("0x");
    // Nothing held: nothing to release (passed over) or return.
    expect(receiptOf(await releasePayments([d])).logs).toEqual([]);
    expect(await returnPayment(d, payer.address)).toEqual(failure("NoHold"));

    // A top-up after the sweep is swept again by the clone that now exists (cheaper: no deployment).
    await pay(d, usd("1"), otherPayer);
    const again = await sweep([d]);
    expect(receivedOf(again)).toEqual(expectedReceived(d, usd("1"), 0, 0n));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("13.34"));
    if (!swept.ok || !again.ok) throw new Error("unreachable");
    expect(again.gasUsed).toBeLessThan(swept.gasUsed);
  });

  it("sweeps two transfers to one address at once", async () => {
    const d = depositFor();
    await pay(d, usd("3"));
    await pay(d, usd("4"), otherPayer);
    const payeeBefore = await balance(chain.usdc, payee.address);
    expect(receivedOf(await sweep([d]))).toEqual(expectedReceived(d, usd("7"), 0, 0n));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("7"));
  });

  it("passes over an empty deposit address (no event, no clone), and sweeps a deposit listed twice once", async () => {
    const empty = depositFor({ holdSeconds: 100n });
    const outcome = await sweep([empty]);
    expect(receiptOf(outcome).logs).toEqual([]);
    expect(await codeAt(addressOf(empty))).toBe("0x");
    expect(await holdOf(empty)).toEqual({ amount: 0n, releaseAt: 0 });

    const d = depositFor();
    await pay(d, usd("5"));
    const payeeBefore = await balance(chain.usdc, payee.address);
    const twice = await sweep([d, empty, d]);
    expect(receivedOf(twice).amount).toBe(usd("5"));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("5"));
    expect(await codeAt(addressOf(empty))).toBe("0x");
  });

  it("leaves a token other than the deposit's at the address: no terms can sweep it", async () => {
    const d = depositFor();
    await pay(d, usd("2"));
    await chain.send(payer, chain.noReturn, NoReturnTokenAbi, "mint", [payer.address, usd("3")]);
    await chain.send(payer, chain.noReturn, NoReturnTokenAbi, "transfer", [addressOf(d), usd("3")]);
    expect(receivedOf(await sweep([d])).amount).toBe(usd("2"));
    // The same terms with the other token name another address, which holds nothing.
    expect(eventsOf(await sweep([{ ...d, token: chain.noReturn }]), "PaymentReceived")).toEqual([]);
    expect(await balance(chain.noReturn, addressOf(d))).toBe(usd("3"));
  });
});

describe("MandateEscrow: payment holds", () => {
  it("holds a swept payment: released by anyone only after the hold, returned only during it", async () => {
    const d = depositFor({ holdSeconds: 1000n });
    await pay(d, usd("20"));
    const payeeBefore = await balance(chain.usdc, payee.address);
    const escrowBefore = await balance(chain.usdc, chain.escrow);
    const sweptAt = chain.clock.now;
    expect(receivedOf(await sweep([d]))).toEqual(expectedReceived(d, usd("20"), sweptAt + 1000, usd("20")));
    expect(await balance(chain.usdc, chain.escrow)).toBe(escrowBefore + usd("20"));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore);
    expect(await holdOf(d)).toEqual({ amount: usd("20"), releaseAt: sweptAt + 1000 });

    chain.clock.advance(sweptAt + 999 - chain.clock.now);
    expect(await releasePayments([d])).toEqual(failure("HoldNotOver"));
    for (const who of [stranger, payer])
      expect(await returnPayment(d, payer.address, who)).toEqual(failure("NotOperator"));
    expect(await returnPayment(d, zeroAddress)).toEqual(failure("InvalidTerms"));

    chain.clock.advance(1);
    expect(await returnPayment(d, payer.address, operator)).toEqual(failure("HoldOver"));
    expect(await returnPayment(d, payer.address, payee)).toEqual(failure("HoldOver"));
    const released = await releasePayments([d], stranger);
    const [event] = eventsOf(released, "PaymentReleased");
    expect(event?.args).toEqual({
      paymentId: d.paymentId,
      payee: getAddress(d.payee),
      depositAddress: getAddress(addressOf(d)),
      token: getAddress(d.token),
      amount: usd("20"),
    });
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("20"));
    expect(await balance(chain.usdc, chain.escrow)).toBe(escrowBefore);
    expect(await holdOf(d)).toEqual({ amount: 0n, releaseAt: 0 });
    expect(receiptOf(await releasePayments([d])).logs).toEqual([]);
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("20"));
    expect(await returnPayment(d, payer.address)).toEqual(failure("NoHold"));
  });

  it("returns a held payment to the address the operator or the payee names, during the hold", async () => {
    for (const by of [operator, payee]) {
      const d = depositFor({ holdSeconds: 1000n });
      await pay(d, usd("8"));
      await sweep([d]);
      const before = await balance(chain.usdc, refundTo.address);
      const returned = await returnPayment(d, refundTo.address, by);
      const [event] = eventsOf(returned, "PaymentReturned");
      expect(event?.args).toEqual({
        paymentId: d.paymentId,
        payee: getAddress(d.payee),
        depositAddress: getAddress(addressOf(d)),
        token: getAddress(d.token),
        amount: usd("8"),
        to: refundTo.address,
      });
      expect(await balance(chain.usdc, refundTo.address)).toBe(before + usd("8"));
      expect(await holdOf(d)).toEqual({ amount: 0n, releaseAt: 0 });
      expect(await returnPayment(d, refundTo.address, by)).toEqual(failure("NoHold"));
    }
  });

  it("sweeps a top-up into the open hold: held is the total, released together at the first sweep's time", async () => {
    const d = depositFor({ holdSeconds: 500n });
    await pay(d, usd("3"));
    await pay(d, usd("4"), otherPayer);
    const firstAt = chain.clock.now;
    expect(receivedOf(await sweep([d]))).toEqual(expectedReceived(d, usd("7"), firstAt + 500, usd("7")));
    chain.clock.advance(100);
    await pay(d, usd("5"));
    expect(await codeAt(addressOf(d))).not.toBe("0x");
    // Dust and a sweep cannot push the payee's release back: the top-up keeps the open hold's time.
    expect(receivedOf(await sweep([d]))).toEqual(expectedReceived(d, usd("5"), firstAt + 500, usd("12")));
    expect(await holdOf(d)).toEqual({ amount: usd("12"), releaseAt: firstAt + 500 });
    chain.clock.advance(firstAt + 499 - chain.clock.now);
    expect(await releasePayments([d])).toEqual(failure("HoldNotOver"));
    chain.clock.advance(1);
    const payeeBefore = await balance(chain.usdc, payee.address);
    expect(eventsOf(await releasePayments([d]), "PaymentReleased")[0]?.args.amount).toBe(usd("12"));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("12"));
    // After the release, new funds start a hold of their own.
    await pay(d, usd("1"));
    const thirdAt = chain.clock.now;
    expect(receivedOf(await sweep([d]))).toEqual(expectedReceived(d, usd("1"), thirdAt + 500, usd("1")));
  });

  it("releases many payments at once; a hold not over reverts them all, one with nothing held is passed over", async () => {
    const a = depositFor({ holdSeconds: 10n });
    const b = depositFor({ holdSeconds: 10n });
    const late = depositFor({ holdSeconds: 1000n });
    const never = depositFor({ holdSeconds: 10n });
    const returned = depositFor({ holdSeconds: 10n });
    await pay(a, usd("1"));
    await pay(b, usd("2"));
    await pay(late, usd("4"));
    await pay(returned, usd("8"));
    await sweep([a, b, late, returned]);
    expect((await returnPayment(returned, refundTo.address)).ok).toBe(true);
    chain.clock.advance(10);
    const payeeBefore = await balance(chain.usdc, payee.address);
    expect(await releasePayments([a, late, b])).toEqual(failure("HoldNotOver"));
    expect(await holdOf(a)).toEqual({ amount: usd("1"), releaseAt: expect.any(Number) });
    // Never held, returned, listed twice: passed over, with no event.
    const released = await releasePayments([never, a, returned, b, a]);
    expect(eventsOf(released, "PaymentReleased").map((e) => [e.args.paymentId, e.args.amount])).toEqual([
      [a.paymentId, usd("1")],
      [b.paymentId, usd("2")],
    ]);
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("3"));
    expect(await holdOf(late)).toEqual({ amount: usd("4"), releaseAt: expect.any(Number) });
  });

  it("mines the operator's batch when a stranger released one of its payments first, releasing the rest", async () => {
    const batch = [usd("1"), usd("2"), usd("4")].map((amount) => ({
      d: depositFor({ holdSeconds: 10n }),
      amount,
    }));
    for (const { d, amount } of batch) await pay(d, amount);
    await sweep(batch.map(({ d }) => d));
    chain.clock.advance(10);
    const payeeBefore = await balance(chain.usdc, payee.address);
    const escrowBefore = await balance(chain.usdc, chain.escrow);
    const [first, second, third] = batch as [
      (typeof batch)[number],
      (typeof batch)[number],
      (typeof batch)[number],
    ];
    const frontRun = await releasePayments([second.d], stranger);
    expect(eventsOf(frontRun, "PaymentReleased").map((e) => e.args.paymentId)).toEqual([second.d.paymentId]);
    const released = await releasePayments(
      batch.map(({ d }) => d),
      operator,
    );
    expect(eventsOf(released, "PaymentReleased").map((e) => e.args)).toEqual(
      [first, third].map(({ d, amount }) => ({
        paymentId: d.paymentId,
        payee: getAddress(d.payee),
        depositAddress: getAddress(addressOf(d)),
        token: getAddress(d.token),
        amount,
      })),
    );
    const transfers = parseEventLogs({
      abi: erc20Abi,
      logs: receiptOf(released).logs,
      eventName: "Transfer",
    });
    expect(transfers.map((t) => [getAddress(t.args.from), getAddress(t.args.to), t.args.value])).toEqual([
      [getAddress(chain.escrow), getAddress(payee.address), usd("1")],
      [getAddress(chain.escrow), getAddress(payee.address), usd("4")],
    ]);
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("7"));
    expect(await balance(chain.usdc, chain.escrow)).toBe(escrowBefore - usd("7"));
    for (const { d } of batch) expect(await holdOf(d)).toEqual({ amount: 0n, releaseAt: 0 });
  });
});

describe("MandateEscrow: deposit address safety", () => {
  it("lets nobody but the escrow call collect, on the collector or on a clone", async () => {
    const collector = await chain.read<Address>(chain.escrow, MandateEscrowAbi, "collector");
    const d = depositFor();
    await pay(d, usd("1"));
    await sweep([d]);
    await pay(d, usd("6"));
    await chain.mint(chain.usdc, collector, usd("1"));
    for (const target of [collector, addressOf(d)])
      for (const who of [stranger, payee, operator, payer])
        expect(
          await chain.send(who, target, DepositCollectorAbi, "collect", [chain.usdc, who.address]),
        ).toEqual(failure("NotEscrow"));
    expect(await balance(chain.usdc, addressOf(d))).toBe(usd("6"));
    expect(await balance(chain.usdc, collector)).toBe(usd("1"));
  });

  it("accepts ether at a deposit address before its clone exists (and strands it), refuses it after", async () => {
    const d = depositFor();
    const deposit = addressOf(d);
    // Before the clone is deployed the address is an empty account: nothing can refuse a transfer.
    expect((await chain.sendValue(payer, deposit, ETHER)).ok).toBe(true);
    expect(await chain.publicClient.getBalance({ address: deposit })).toBe(ETHER);
    // The balance does not stop the clone's CREATE2 deployment, and no sweep moves it.
    await pay(d, usd("1"));
    expect(receivedOf(await sweep([d])).amount).toBe(usd("1"));
    expect(await codeAt(deposit)).not.toBe("0x");
    expect(await chain.publicClient.getBalance({ address: deposit })).toBe(ETHER);
    // Once the clone exists it refuses ether (the collector has neither receive nor a payable fallback).
    expect(await chain.sendValue(payer, deposit, 1n)).toEqual(failure("revert"));
    const collector = await chain.read<Address>(chain.escrow, MandateEscrowAbi, "collector");
    expect(await chain.sendValue(payer, collector, 1n)).toEqual(failure("revert"));
    expect(await chain.sendValue(payer, chain.escrow, 1n)).toEqual(failure("revert"));
    expect(await chain.publicClient.getBalance({ address: deposit })).toBe(ETHER);
  });

  it("works with a token that returns nothing from transfer (USDT-like)", async () => {
    const nrt = chain.noReturn;
    const direct = depositFor({ token: nrt });
    const held = depositFor({ token: nrt, holdSeconds: 50n });
    const returned = depositFor({ token: nrt, holdSeconds: 50n });
    await pay(direct, usd("5"));
    await pay(held, usd("7"));
    await pay(returned, usd("2"));
    const payeeBefore = await balance(nrt, payee.address);
    const refundBefore = await balance(nrt, refundTo.address);
    const escrowBefore = await balance(nrt, chain.escrow);
    expect(eventsOf(await sweep([direct, held, returned]), "PaymentReceived")).toHaveLength(3);
    expect(await balance(nrt, payee.address)).toBe(payeeBefore + usd("5"));
    expect(await balance(nrt, chain.escrow)).toBe(escrowBefore + usd("9"));
    expect((await returnPayment(returned, refundTo.address)).ok).toBe(true);
    chain.clock.advance(50);
    expect((await releasePayments([held])).ok).toBe(true);
    expect(await balance(nrt, payee.address)).toBe(payeeBefore + usd("12"));
    expect(await balance(nrt, refundTo.address)).toBe(refundBefore + usd("2"));
    expect(await balance(nrt, chain.escrow)).toBe(escrowBefore);
  });

  it("refuses a hostile token's reentrant sweep, release, return and collect", async () => {
    const hostile = await chain.deployReentrant();
    const direct = depositFor({ token: hostile });
    const held = depositFor({ token: hostile, holdSeconds: 1000n });
    const target = depositFor({ token: hostile, holdSeconds: 1000n });
    const payHostile = async (d: DepositTerms, amount: bigint) => {
      await chain.send(payer, hostile, ReentrantTokenAbi, "mint", [payer.address, amount]);
      await chain.send(payer, hostile, ReentrantTokenAbi, "transfer", [addressOf(d), amount]);
    };
    await payHostile(target, usd("50"));
    await sweep([target]);
    // Each payload is tried from inside a token transfer made by the escrow (or by a clone it drives).
    const escrowCalls = [
      encodeFunctionData({ abi: MandateEscrowAbi, functionName: "sweep", args: [[target]] }),
      encodeFunctionData({ abi: MandateEscrowAbi, functionName: "releasePayments", args: [[target]] }),
      encodeFunctionData({
        abi: MandateEscrowAbi,
        functionName: "returnPayment",
        args: [target, stranger.address],
      }),
    ];
    const expectRefused = async (error: Hex) => {
      expect(await chain.read(hostile, ReentrantTokenAbi, "attempted")).toBe(true);
      expect(await chain.read(hostile, ReentrantTokenAbi, "reentrySucceeded")).toBe(false);
      expect(await chain.read(hostile, ReentrantTokenAbi, "reentryError")).toBe(error);
    };
    const arm = (to: Address, payload: Hex) =>
      chain.send(operator, hostile, ReentrantTokenAbi, "arm", [to, payload]);
    const disarm = () => arm(zeroAddress, "0x");

    for (const payload of escrowCalls) {
      for (const d of [direct, held]) {
        await payHostile(d, usd("2"));
        await arm(chain.escrow, payload);
        expect(receivedOf(await sweep([d])).amount).toBe(usd("2"));
        await expectRefused(reentrancySelector);
        await disarm();
      }
      const toReturn = depositFor({ token: hostile, holdSeconds: 1000n });
      await payHostile(toReturn, usd("1"));
      await sweep([toReturn]);
      await arm(chain.escrow, payload);
      expect((await returnPayment(toReturn, refundTo.address)).ok).toBe(true);
      await expectRefused(reentrancySelector);
      await disarm();
    }
    // A clone's collect called by the token itself (not the escrow) is refused too.
    await payHostile(direct, usd("1"));
    await arm(
      addressOf(direct),
      encodeFunctionData({
        abi: DepositCollectorAbi,
        functionName: "collect",
        args: [hostile, stranger.address],
      }),
    );
    await sweep([direct]);
    await expectRefused(keccak256(toHex("NotEscrow()")).slice(0, 10) as Hex);
    await disarm();

    chain.clock.advance(1000);
    for (const payload of escrowCalls) {
      const d = depositFor({ token: hostile, holdSeconds: 1n });
      await payHostile(d, usd("1"));
      await sweep([d]);
      chain.clock.advance(1);
      await arm(chain.escrow, payload);
      expect((await releasePayments([d])).ok).toBe(true);
      await expectRefused(reentrancySelector);
      await disarm();
    }
    // The target's hold was never touched by any reentrant call.
    expect((await holdOf(target)).amount).toBe(usd("50"));
    expect(await balance(hostile, stranger.address)).toBe(0n);
  });
});

describe("Circle's USDC: EIP-3009 transfer by authorization, as the pay page relays it", () => {
  const gasless = privateKeyToAccount(keccak256(toHex("gasless payer")));
  let nonceCounter = 0;
  const freshNonce = () => keccak256(toHex(`authorization nonce ${nonceCounter++}`));
  const authorization = (overrides: Partial<Authorization> = {}): Authorization => ({
    from: gasless.address,
    to: payee.address,
    value: usd("1"),
    validAfter: 0n,
    validBefore: BigInt(chain.clock.now + 3600),
    nonce: freshNonce(),
    ...overrides,
  });
  const submit = (
    a: Authorization,
    sig: { v: number; r: Hex; s: Hex },
    by = operator,
    functionName = "transferWithAuthorization",
  ) =>
    chain.sendForReceipt(by, chain.usdc, usdcAbi, functionName, [
      a.from,
      a.to,
      a.value,
      a.validAfter,
      a.validBefore,
      a.nonce,
      sig.v,
      sig.r,
      sig.s,
    ]);
  const used = (authorizer: Hex, nonce: Hex) =>
    chain.read<boolean>(chain.usdc, usdcAbi, "authorizationState", [authorizer, nonce]);

  beforeAll(async () => {
    await chain.mint(chain.usdc, gasless.address, usd("1000"));
  });

  it("signs USDC's type hashes (the token accepts what is signed with them)", () => {
    // The harness signs with AUTHORIZATION_TYPES; every acceptance below proves the token hashes the same
    // types, and these are USDC's (FiatTokenV2) published constants.
    const typeHash = (name: keyof typeof AUTHORIZATION_TYPES) =>
      keccak256(toHex(`${name}(${AUTHORIZATION_TYPES[name].map((f) => `${f.type} ${f.name}`).join(",")})`));
    expect(typeHash("TransferWithAuthorization")).toBe(
      "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267",
    );
    expect(typeHash("ReceiveWithAuthorization")).toBe(
      "0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8",
    );
    expect(typeHash("CancelAuthorization")).toBe(
      "0x158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a1597429",
    );
  });

  it("pays a deposit address from a payer without gas: signed by the payer, submitted by the relayer, once", async () => {
    const d = depositFor();
    const a = authorization({ to: addressOf(d), value: usd("25") });
    const sig = await chain.signAuthorization(gasless, chain.usdc, a);
    expect(await used(gasless.address, a.nonce)).toBe(false);
    // Tampered authorizations recover another signer.
    for (const tampered of [
      { ...a, to: stranger.address },
      { ...a, value: usd("26") },
      { ...a, nonce: freshNonce() },
      { ...a, validBefore: a.validBefore + 1n },
    ])
      expect(await submit(tampered, sig)).toEqual(failure("FiatTokenV2: invalid signature"));
    // Signed by someone else for the payer's funds.
    expect(await submit(a, await chain.signAuthorization(stranger, chain.usdc, a))).toEqual(
      failure("FiatTokenV2: invalid signature"),
    );
    // The same signature with s flipped to the upper half of the curve order (malleability).
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const malleable = { v: sig.v === 27 ? 28 : 27, r: sig.r, s: toHex(n - BigInt(sig.s), { size: 32 }) };
    expect(await submit(a, malleable)).toEqual(failure("ECRecover: invalid signature 's' value"));

    const outcome = await submit(a, sig);
    const logs = parseEventLogs({ abi: usdcAbi, logs: receiptOf(outcome).logs });
    expect(logs.map((l) => l.eventName)).toEqual(["AuthorizationUsed", "Transfer"]);
    expect(logs[0]?.args).toEqual({ authorizer: gasless.address, nonce: a.nonce });
    expect(await balance(chain.usdc, addressOf(d))).toBe(usd("25"));
    expect(await used(gasless.address, a.nonce)).toBe(true);
    expect(await chain.publicClient.getTransactionCount({ address: gasless.address })).toBe(0);
    expect(await chain.publicClient.getBalance({ address: gasless.address })).toBe(0n);
    expect(await submit(a, sig)).toEqual(failure("FiatTokenV2: authorization is used or canceled"));
    expect(await submit(a, sig, stranger)).toEqual(failure("FiatTokenV2: authorization is used or canceled"));

    const payeeBefore = await balance(chain.usdc, payee.address);
    expect(receivedOf(await sweep([d])).amount).toBe(usd("25"));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("25"));
  });

  it("is valid strictly after validAfter and strictly before validBefore", async () => {
    const now = BigInt(chain.clock.now);
    const notYet = authorization({ validAfter: now });
    expect(await submit(notYet, await chain.signAuthorization(gasless, chain.usdc, notYet))).toEqual(
      failure("FiatTokenV2: authorization is not yet valid"),
    );
    const expired = authorization({ validBefore: now });
    expect(await submit(expired, await chain.signAuthorization(gasless, chain.usdc, expired))).toEqual(
      failure("FiatTokenV2: authorization is expired"),
    );
    const exact = authorization({ validAfter: now - 1n, validBefore: now + 1n });
    expect((await submit(exact, await chain.signAuthorization(gasless, chain.usdc, exact))).ok).toBe(true);
    // A window in the future opens strictly after validAfter and closes at validBefore.
    const later = authorization({ validAfter: now + 100n, validBefore: now + 200n });
    const sig = await chain.signAuthorization(gasless, chain.usdc, later);
    expect(await submit(later, sig)).toEqual(failure("FiatTokenV2: authorization is not yet valid"));
    chain.clock.advance(Number(now) + 100 - chain.clock.now);
    expect(await submit(later, sig)).toEqual(failure("FiatTokenV2: authorization is not yet valid"));
    chain.clock.advance(1);
    expect((await submit(later, sig)).ok).toBe(true);
    const closing = authorization({ validBefore: BigInt(chain.clock.now + 1) });
    const closingSig = await chain.signAuthorization(gasless, chain.usdc, closing);
    chain.clock.advance(1);
    expect(await submit(closing, closingSig)).toEqual(failure("FiatTokenV2: authorization is expired"));
  });

  it("receiveWithAuthorization: only the payee may submit it, and a transfer signature does not fit it", async () => {
    const a = authorization({ to: payee.address, value: usd("3") });
    const sig = await chain.signAuthorization(gasless, chain.usdc, a, "ReceiveWithAuthorization");
    for (const by of [operator, stranger, gasless])
      expect(await submit(a, sig, by, "receiveWithAuthorization")).toEqual(
        failure("FiatTokenV2: caller must be the payee"),
      );
    const transferSig = await chain.signAuthorization(gasless, chain.usdc, a);
    expect(await submit(a, transferSig, payee, "receiveWithAuthorization")).toEqual(
      failure("FiatTokenV2: invalid signature"),
    );
    expect(await submit(a, sig)).toEqual(failure("FiatTokenV2: invalid signature"));
    const before = await balance(chain.usdc, payee.address);
    expect((await submit(a, sig, payee, "receiveWithAuthorization")).ok).toBe(true);
    expect(await balance(chain.usdc, payee.address)).toBe(before + usd("3"));
    expect(await submit(a, sig, payee, "receiveWithAuthorization")).toEqual(
      failure("FiatTokenV2: authorization is used or canceled"),
    );
  });

  it("cancelAuthorization burns an unused nonce, on the authorizer's signature only", async () => {
    const a = authorization();
    const sig = await chain.signAuthorization(gasless, chain.usdc, a);
    const cancel = (signature: { v: number; r: Hex; s: Hex }, nonce = a.nonce) =>
      chain.sendForReceipt(operator, chain.usdc, usdcAbi, "cancelAuthorization", [
        gasless.address,
        nonce,
        signature.v,
        signature.r,
        signature.s,
      ]);
    expect(
      await cancel(await chain.signCancelAuthorization(stranger, chain.usdc, gasless.address, a.nonce)),
    ).toEqual(failure("FiatTokenV2: invalid signature"));
    const cancelSig = await chain.signCancelAuthorization(gasless, chain.usdc, gasless.address, a.nonce);
    const canceled = await cancel(cancelSig);
    const logs = parseEventLogs({ abi: usdcAbi, logs: receiptOf(canceled).logs });
    expect(logs.map((l) => [l.eventName, l.args])).toEqual([
      ["AuthorizationCanceled", { authorizer: gasless.address, nonce: a.nonce }],
    ]);
    expect(await used(gasless.address, a.nonce)).toBe(true);
    expect(await submit(a, sig)).toEqual(failure("FiatTokenV2: authorization is used or canceled"));
    expect(await cancel(cancelSig)).toEqual(failure("FiatTokenV2: authorization is used or canceled"));
    // A used authorization cannot be canceled either.
    const b = authorization();
    expect((await submit(b, await chain.signAuthorization(gasless, chain.usdc, b))).ok).toBe(true);
    expect(
      await cancel(
        await chain.signCancelAuthorization(gasless, chain.usdc, gasless.address, b.nonce),
        b.nonce,
      ),
    ).toEqual(failure("FiatTokenV2: authorization is used or canceled"));
  });

  it("accepts an ERC-1271 smart wallet's authorization", async () => {
    const owner = privateKeyToAccount(keccak256(toHex("wallet owner")));
    const wallet = await chain.deploy(
      [],
      concat([TestWalletBytecode, encodeAbiParameters([{ type: "address" }], [owner.address])]),
    );
    await chain.mint(chain.usdc, wallet, usd("10"));
    const d = depositFor();
    const a = authorization({ from: wallet, to: addressOf(d), value: usd("4") });
    expect(await submit(a, await chain.signAuthorization(stranger, chain.usdc, a))).toEqual(
      failure("FiatTokenV2: invalid signature"),
    );
    expect((await submit(a, await chain.signAuthorization(owner, chain.usdc, a))).ok).toBe(true);
    expect(await balance(chain.usdc, addressOf(d))).toBe(usd("4"));
    expect(await used(wallet, a.nonce)).toBe(true);
  });
});
