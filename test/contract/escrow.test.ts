import {
  encodeAbiParameters,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  keccak256,
  parseEventLogs,
  parseUnits,
  type TransactionReceipt,
  toFunctionSelector,
  toHex,
} from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { NoReturnTokenAbi } from "../../abis/NoReturnToken.ts";
import { ReentrantTokenAbi } from "../../abis/ReentrantToken.ts";
import {
  type Address,
  accountAt,
  type Chain,
  mandateIdFor,
  mandateTerms,
  type ReceiptOutcome,
  startChain,
  type Terms,
} from "./harness.ts";

const operator = accountAt(1);
const payee = accountAt(2);
const customer = accountAt(3);
const stranger = accountAt(4);
const usd = (n: string) => parseUnits(n, 6);
const DAY = 86_400;
const MAX = 2n ** 256n - 1n;

let chain: Chain;
let salt = 1n;

beforeAll(async () => {
  chain = await startChain();
});
afterAll(async () => {
  await chain?.stop();
});

const termsFor = (overrides: Partial<Terms> = {}): Terms =>
  mandateTerms(
    chain,
    { customer: customer.address, payee: payee.address, operator: operator.address },
    salt++,
    {
      cap: usd("50"),
      approvalPeriods: 3,
      deadline: BigInt(chain.clock.now + 3600),
      ...overrides,
    },
  );

const authorize = async (terms: Terms, signer = customer) =>
  chain.send(operator, chain.escrow, MandateEscrowAbi, "authorize", [
    terms,
    await chain.signTerms(signer, terms),
  ]);
const charge = (id: Hex, amount: bigint, by = operator) =>
  chain.send(by, chain.escrow, MandateEscrowAbi, "charge", [id, amount]);
const balance = (token: Address, who: Address) => chain.read<bigint>(token, erc20Abi, "balanceOf", [who]);
const fund = async (token: Address, amount: bigint, allowance = MAX, who = customer) => {
  await chain.mint(token, who.address, amount);
  await chain.send(who, token, erc20Abi, "approve", [chain.escrow, allowance]);
};
const failure = (name: string) => ({ ok: false, error: name });
const releaseManyOf = (by: typeof stranger, ids: readonly Hex[]) =>
  chain.sendForReceipt(by, chain.escrow, MandateEscrowAbi, "releaseMany", [ids, ids.map(() => 0)]);
const receiptOf = (outcome: ReceiptOutcome) => {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.error}`);
  return outcome.receipt;
};
/** A transaction's `Released` events, in order, addresses checksummed as the ABI decodes them. */
const releasedOf = (outcome: ReceiptOutcome) =>
  parseEventLogs({ abi: MandateEscrowAbi, logs: receiptOf(outcome).logs, eventName: "Released" }).map(
    (log) => log.args,
  );
/** The escrow's outgoing token transfers in a transaction: [token, to, value], in order. */
const escrowTransfersOf = (outcome: ReceiptOutcome) =>
  parseEventLogs({ abi: erc20Abi, logs: receiptOf(outcome).logs, eventName: "Transfer" })
    .filter((log) => log.args.from.toLowerCase() === chain.escrow.toLowerCase())
    .map((log) => [getAddress(log.address), getAddress(log.args.to), log.args.value]);

describe("MandateEscrow: charges", () => {
  it("collects up to the cap once per period, to the payee fixed by the signature", async () => {
    await fund(chain.usdc, usd("1000"));
    const terms = termsFor();
    expect((await authorize(terms)).ok).toBe(true);
    const before = await balance(chain.usdc, payee.address);
    expect(await charge(terms.mandateId, usd("60"))).toEqual(failure("CapExceeded"));
    expect(await charge(terms.mandateId, 0n)).toEqual(failure("CapExceeded"));
    expect(await charge(terms.mandateId, usd("10"), stranger)).toEqual(failure("NotOperator"));
    expect((await charge(terms.mandateId, usd("50"))).ok).toBe(true);
    expect(await balance(chain.usdc, payee.address)).toBe(before + usd("50"));
    expect(await charge(terms.mandateId, usd("1"))).toEqual(failure("PeriodAlreadyCharged"));
    expect(await chain.read(chain.escrow, MandateEscrowAbi, "chargedThisPeriod", [terms.mandateId])).toBe(
      true,
    );
    chain.clock.advance(32 * DAY);
    expect(await chain.read(chain.escrow, MandateEscrowAbi, "approvalLeft", [terms.mandateId])).toBe(
      usd("100"),
    );
    expect((await charge(terms.mandateId, usd("30"))).ok).toBe(true);
  });

  it("refuses a charge before the anchor, and on an unknown mandate", async () => {
    await fund(chain.usdc, usd("100"));
    const terms = termsFor({ anchor: BigInt(chain.clock.now + 5 * DAY) });
    await authorize(terms);
    expect(await charge(terms.mandateId, usd("1"))).toEqual(failure("MandateNotStarted"));
    expect(await charge(mandateIdFor(customer.address, 999_999n), usd("1"))).toEqual(
      failure("UnknownMandate"),
    );
  });

  it("tells insufficient balance from insufficient allowance from exhausted approval", async () => {
    const terms = termsFor({ cap: usd("40"), approvalPeriods: 2 });
    await authorize(terms);
    const poor = accountAt(5);
    const poorTerms = termsFor({ mandateId: mandateIdFor(poor.address, salt++) });
    await chain.send(poor, chain.usdc, erc20Abi, "approve", [chain.escrow, MAX]);
    expect((await authorize(poorTerms, poor)).ok).toBe(true);
    expect(await charge(poorTerms.mandateId, usd("5"))).toEqual(failure("InsufficientBalance"));
    await chain.mint(chain.usdc, poor.address, usd("100"));
    await chain.send(poor, chain.usdc, erc20Abi, "approve", [chain.escrow, usd("1")]);
    expect(await charge(poorTerms.mandateId, usd("5"))).toEqual(failure("InsufficientAllowance"));

    await fund(chain.usdc, usd("500"));
    expect((await charge(terms.mandateId, usd("40"))).ok).toBe(true);
    chain.clock.advance(31 * DAY);
    expect((await charge(terms.mandateId, usd("40"))).ok).toBe(true);
    chain.clock.advance(31 * DAY);
    expect(await charge(terms.mandateId, usd("40"))).toEqual(failure("ApprovalExhausted"));
    // Re-signing the same mandate restores the approval; the period stays uncharged, so it can be charged now.
    expect((await authorize({ ...terms, nonce: 2n, deadline: BigInt(chain.clock.now + 60) })).ok).toBe(true);
    expect(await chain.read(chain.escrow, MandateEscrowAbi, "approvalLeft", [terms.mandateId])).toBe(
      usd("80"),
    );
    expect((await charge(terms.mandateId, usd("40"))).ok).toBe(true);
  });

  it("charges many in one transaction, all or none", async () => {
    await fund(chain.usdc, usd("1000"));
    const a = termsFor();
    const b = termsFor();
    await authorize(a);
    await authorize(b);
    const batch = (ids: Hex[], amounts: bigint[]) =>
      chain.send(operator, chain.escrow, MandateEscrowAbi, "chargeMany", [ids, amounts]);
    expect(await batch([a.mandateId, b.mandateId], [usd("1")])).toEqual(failure("LengthMismatch"));
    expect(await batch([a.mandateId, b.mandateId], [usd("10"), usd("51")])).toEqual(failure("CapExceeded"));
    expect(await chain.read(chain.escrow, MandateEscrowAbi, "chargedThisPeriod", [a.mandateId])).toBe(false);
    expect((await batch([a.mandateId, b.mandateId], [usd("10"), usd("20")])).ok).toBe(true);
  });

  it("works with a token that returns nothing from transfer (USDT-like)", async () => {
    const nrt = chain.noReturn;
    await chain.send(customer, nrt, NoReturnTokenAbi, "mint", [customer.address, usd("100")]);
    await chain.send(customer, nrt, NoReturnTokenAbi, "approve", [chain.escrow, MAX]);
    const direct = termsFor({ token: nrt });
    const held = termsFor({ token: nrt, holdSeconds: 100n });
    await authorize(direct);
    await authorize(held);
    expect((await charge(direct.mandateId, usd("5"))).ok).toBe(true);
    expect((await charge(held.mandateId, usd("7"))).ok).toBe(true);
    chain.clock.advance(100);
    expect(
      (await chain.send(stranger, chain.escrow, MandateEscrowAbi, "release", [held.mandateId, 0])).ok,
    ).toBe(true);
    expect(await chain.read(nrt, NoReturnTokenAbi, "balanceOf", [payee.address])).toBe(usd("12"));
    expect(await chain.read(nrt, NoReturnTokenAbi, "balanceOf", [chain.escrow])).toBe(0n);
  });
});

describe("MandateEscrow: holds", () => {
  it("holds a charge, returns it only during the hold, releases it only after", async () => {
    await fund(chain.usdc, usd("1000"));
    const terms = termsFor({ holdSeconds: 1000n });
    await authorize(terms);
    const customerBefore = await balance(chain.usdc, customer.address);
    const payeeBefore = await balance(chain.usdc, payee.address);
    expect((await charge(terms.mandateId, usd("20"))).ok).toBe(true);
    expect(await balance(chain.usdc, chain.escrow)).toBe(usd("20"));
    const release = (by = stranger) =>
      chain.send(by, chain.escrow, MandateEscrowAbi, "release", [terms.mandateId, 0]);
    const giveBack = (by = operator) =>
      chain.send(by, chain.escrow, MandateEscrowAbi, "returnCharge", [terms.mandateId, 0]);
    expect(await release()).toEqual(failure("HoldNotOver"));
    expect(await giveBack(stranger)).toEqual(failure("NotOperator"));
    expect((await giveBack(operator)).ok).toBe(true);
    expect(await balance(chain.usdc, customer.address)).toBe(customerBefore);
    expect(await giveBack(operator)).toEqual(failure("NoHold"));

    chain.clock.advance(31 * DAY);
    const chargedAt = chain.clock.now;
    expect((await charge(terms.mandateId, usd("20"))).ok).toBe(true);
    chain.clock.advance(chargedAt + 999 - chain.clock.now);
    expect(
      await chain.send(stranger, chain.escrow, MandateEscrowAbi, "release", [terms.mandateId, 1]),
    ).toEqual(failure("HoldNotOver"));
    chain.clock.advance(1);
    expect(
      await chain.send(payee, chain.escrow, MandateEscrowAbi, "returnCharge", [terms.mandateId, 1]),
    ).toEqual(failure("HoldOver"));
    expect(
      (await chain.send(stranger, chain.escrow, MandateEscrowAbi, "release", [terms.mandateId, 1])).ok,
    ).toBe(true);
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("20"));
    expect(await balance(chain.usdc, chain.escrow)).toBe(0n);
  });

  it("still releases held charges after the customer revoked", async () => {
    await fund(chain.usdc, usd("100"));
    const terms = termsFor({ holdSeconds: 10n });
    await authorize(terms);
    await charge(terms.mandateId, usd("5"));
    expect(await chain.send(stranger, chain.escrow, MandateEscrowAbi, "revoke", [terms.mandateId])).toEqual(
      failure("NotCustomer"),
    );
    expect((await chain.send(customer, chain.escrow, MandateEscrowAbi, "revoke", [terms.mandateId])).ok).toBe(
      true,
    );
    chain.clock.advance(31 * DAY);
    expect(await charge(terms.mandateId, usd("5"))).toEqual(failure("Revoked"));
    expect(await authorize({ ...terms, nonce: 2n, deadline: BigInt(chain.clock.now + 60) })).toEqual(
      failure("Revoked"),
    );
    expect(
      (await chain.send(stranger, chain.escrow, MandateEscrowAbi, "release", [terms.mandateId, 0])).ok,
    ).toBe(true);
  });

  it("keeps a hold longer than a period: the next period's held charge leaves it releasable and returnable", async () => {
    await fund(chain.usdc, usd("1000"));
    const terms = termsFor({ holdSeconds: BigInt(45 * DAY), approvalPeriods: 6 });
    await authorize(terms);
    const holdOf = (period: number) =>
      chain.read<[bigint, bigint]>(chain.escrow, MandateEscrowAbi, "holdOf", [terms.mandateId, period]);
    const release = (period: number) =>
      chain.send(stranger, chain.escrow, MandateEscrowAbi, "release", [terms.mandateId, period]);
    const giveBack = (period: number) =>
      chain.send(operator, chain.escrow, MandateEscrowAbi, "returnCharge", [terms.mandateId, period]);
    const payeeBefore = await balance(chain.usdc, payee.address);
    const escrowBefore = await balance(chain.usdc, chain.escrow);
    const ends: bigint[] = [];
    for (const [period, amount] of [usd("10"), usd("20"), usd("30")].entries()) {
      if (period > 0) chain.clock.advance(31 * DAY);
      ends.push(BigInt(chain.clock.now + 45 * DAY));
      expect((await charge(terms.mandateId, amount)).ok, `charge of period ${period}`).toBe(true);
    }
    // Three holds open at once, each with its own amount and end.
    expect(await holdOf(0)).toEqual([usd("10"), ends[0]]);
    expect(await holdOf(1)).toEqual([usd("20"), ends[1]]);
    expect(await holdOf(2)).toEqual([usd("30"), ends[2]]);
    expect(await balance(chain.usdc, chain.escrow)).toBe(escrowBefore + usd("60"));
    // Period 0's hold is over, 1's and 2's are not.
    expect(await release(1)).toEqual(failure("HoldNotOver"));
    expect(await giveBack(0)).toEqual(failure("HoldOver"));
    expect((await release(0)).ok).toBe(true);
    expect(await release(0)).toEqual(failure("NoHold"));
    expect((await giveBack(2)).ok).toBe(true);
    expect(await giveBack(2)).toEqual(failure("NoHold"));
    expect(await holdOf(2)).toEqual([0n, 0n]);
    // A held charge after a return: the new hold takes the mandate's record, period 1's stays where it was.
    chain.clock.advance(31 * DAY);
    expect((await charge(terms.mandateId, usd("40"))).ok).toBe(true);
    expect(await holdOf(1)).toEqual([usd("20"), ends[1]]);
    chain.clock.advance(60 * DAY);
    expect((await release(3)).ok).toBe(true);
    expect((await release(1)).ok).toBe(true);
    expect(await release(1)).toEqual(failure("NoHold"));
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("70"));
    expect(await balance(chain.usdc, chain.escrow)).toBe(escrowBefore);
  });

  it("keeps an open hold when a re-signature turns holds off, and releases it later", async () => {
    await fund(chain.usdc, usd("1000"));
    const terms = termsFor({ holdSeconds: BigInt(40 * DAY) });
    await authorize(terms);
    expect((await charge(terms.mandateId, usd("15"))).ok).toBe(true);
    const resigned = { ...terms, holdSeconds: 0n, nonce: 2n, deadline: BigInt(chain.clock.now + 60) };
    expect((await authorize(resigned)).ok).toBe(true);
    chain.clock.advance(31 * DAY);
    const payeeBefore = await balance(chain.usdc, payee.address);
    expect((await charge(terms.mandateId, usd("5"))).ok).toBe(true);
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("5"));
    const [held] = await chain.read<[bigint, bigint]>(chain.escrow, MandateEscrowAbi, "holdOf", [
      terms.mandateId,
      0,
    ]);
    expect(held).toBe(usd("15"));
    chain.clock.advance(10 * DAY);
    expect(
      (await chain.send(stranger, chain.escrow, MandateEscrowAbi, "release", [terms.mandateId, 0])).ok,
    ).toBe(true);
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("20"));
  });

  it("releases many in one transaction, paying each payee and token exactly; a hold not over reverts them all", async () => {
    const otherPayee = accountAt(5);
    await fund(chain.usdc, usd("1000"));
    await chain.send(customer, chain.noReturn, NoReturnTokenAbi, "mint", [customer.address, usd("100")]);
    await chain.send(customer, chain.noReturn, NoReturnTokenAbi, "approve", [chain.escrow, MAX]);
    // Runs of the same payee and token, broken by another payee and another token.
    const plan = [
      { payee: payee.address, token: chain.usdc, amount: usd("1") },
      { payee: payee.address, token: chain.usdc, amount: usd("2") },
      { payee: otherPayee.address, token: chain.usdc, amount: usd("4") },
      { payee: payee.address, token: chain.noReturn, amount: usd("8") },
      { payee: payee.address, token: chain.usdc, amount: usd("16") },
    ];
    const ids: Hex[] = [];
    for (const item of plan) {
      const terms = termsFor({ payee: item.payee, token: item.token, holdSeconds: 100n });
      expect((await authorize(terms)).ok).toBe(true);
      expect((await charge(terms.mandateId, item.amount)).ok).toBe(true);
      ids.push(terms.mandateId);
    }
    const late = termsFor({ holdSeconds: 1000n });
    expect((await authorize(late)).ok).toBe(true);
    expect((await charge(late.mandateId, usd("32"))).ok).toBe(true);
    const before = {
      payeeUsdc: await balance(chain.usdc, payee.address),
      otherUsdc: await balance(chain.usdc, otherPayee.address),
      payeeNrt: await chain.read<bigint>(chain.noReturn, NoReturnTokenAbi, "balanceOf", [payee.address]),
      escrowUsdc: await balance(chain.usdc, chain.escrow),
    };
    chain.clock.advance(100);
    // One of them still held: nothing moves.
    expect(await releaseManyOf(stranger, [...ids, late.mandateId])).toEqual(failure("HoldNotOver"));
    expect(await balance(chain.usdc, chain.escrow)).toBe(before.escrowUsdc);
    const released = await releaseManyOf(stranger, ids);
    expect(releasedOf(released).map((e) => [e.mandateId, e.amount, e.payee])).toEqual(
      plan.map((item, i) => [ids[i], item.amount, item.payee]),
    );
    expect(escrowTransfersOf(released)).toEqual([
      [getAddress(chain.usdc), payee.address, usd("3")],
      [getAddress(chain.usdc), otherPayee.address, usd("4")],
      [getAddress(chain.noReturn), payee.address, usd("8")],
      [getAddress(chain.usdc), payee.address, usd("16")],
    ]);
    expect(await balance(chain.usdc, payee.address)).toBe(before.payeeUsdc + usd("19"));
    expect(await balance(chain.usdc, otherPayee.address)).toBe(before.otherUsdc + usd("4"));
    expect(await chain.read(chain.noReturn, NoReturnTokenAbi, "balanceOf", [payee.address])).toBe(
      before.payeeNrt + usd("8"),
    );
    expect(await balance(chain.usdc, chain.escrow)).toBe(before.escrowUsdc - usd("23"));
  });

  it("passes over charges with nothing held in releaseMany (released, returned, never held, listed twice); release alone still refuses them", async () => {
    await fund(chain.usdc, usd("1000"));
    const ids: Hex[] = [];
    for (const amount of [usd("1"), usd("2")]) {
      const terms = termsFor({ holdSeconds: 100n });
      expect((await authorize(terms)).ok).toBe(true);
      expect((await charge(terms.mandateId, amount)).ok).toBe(true);
      ids.push(terms.mandateId);
    }
    const [kept, returned] = ids as [Hex, Hex];
    expect(
      (await chain.send(operator, chain.escrow, MandateEscrowAbi, "returnCharge", [returned, 0])).ok,
    ).toBe(true);
    chain.clock.advance(100);
    const payeeBefore = await balance(chain.usdc, payee.address);
    const never = mandateIdFor(customer.address, 999_998n);
    const released = await releaseManyOf(stranger, [never, returned, kept, kept]);
    expect(releasedOf(released).map((e) => [e.mandateId, e.amount])).toEqual([[kept, usd("1")]]);
    expect(escrowTransfersOf(released)).toEqual([[getAddress(chain.usdc), payee.address, usd("1")]]);
    expect(await balance(chain.usdc, payee.address)).toBe(payeeBefore + usd("1"));
    // Nothing left at all: the batch mines, with no event and no transfer.
    const empty = await releaseManyOf(stranger, [kept, returned, never]);
    if (!empty.ok) throw new Error(empty.error);
    expect(empty.receipt.logs).toEqual([]);
    for (const id of [kept, returned, never])
      expect(await chain.send(stranger, chain.escrow, MandateEscrowAbi, "release", [id, 0])).toEqual(
        failure("NoHold"),
      );
    expect(await chain.send(operator, chain.escrow, MandateEscrowAbi, "returnCharge", [returned, 0])).toEqual(
      failure("NoHold"),
    );
  });

  it("mines the operator's batch when a stranger released one of its charges first, releasing the rest", async () => {
    const otherPayee = accountAt(5);
    await fund(chain.usdc, usd("1000"));
    // The relayer's batch, ordered by token and payee: a run of three to one payee, then one to another.
    const plan = [
      { payee: payee.address, amount: usd("1") },
      { payee: payee.address, amount: usd("2") },
      { payee: payee.address, amount: usd("4") },
      { payee: otherPayee.address, amount: usd("8") },
    ];
    const ids: Hex[] = [];
    for (const item of plan) {
      const terms = termsFor({ payee: item.payee, holdSeconds: 100n });
      expect((await authorize(terms)).ok).toBe(true);
      expect((await charge(terms.mandateId, item.amount)).ok).toBe(true);
      ids.push(terms.mandateId);
    }
    chain.clock.advance(100);
    const before = {
      payee: await balance(chain.usdc, payee.address),
      other: await balance(chain.usdc, otherPayee.address),
      escrow: await balance(chain.usdc, chain.escrow),
    };
    // The stranger releases the middle of the run first (its own Released, its own transfer).
    const first = await chain.sendForReceipt(stranger, chain.escrow, MandateEscrowAbi, "release", [
      ids[1],
      0,
    ]);
    expect(releasedOf(first).map((e) => [e.mandateId, e.amount, e.payee])).toEqual([
      [ids[1], usd("2"), payee.address],
    ]);
    const batch = await releaseManyOf(operator, ids);
    expect(releasedOf(batch)).toEqual(
      [0, 2, 3].map((i) => ({
        mandateId: ids[i],
        chargeId: keccak256(
          encodeAbiParameters([{ type: "bytes32" }, { type: "uint32" }], [ids[i] as Hex, 0]),
        ),
        period: 0,
        amount: plan[i]?.amount,
        payee: plan[i]?.payee,
      })),
    );
    // The run around the passed-over charge is still paid with one transfer.
    expect(escrowTransfersOf(batch)).toEqual([
      [getAddress(chain.usdc), payee.address, usd("5")],
      [getAddress(chain.usdc), otherPayee.address, usd("8")],
    ]);
    expect(await balance(chain.usdc, payee.address)).toBe(before.payee + usd("7"));
    expect(await balance(chain.usdc, otherPayee.address)).toBe(before.other + usd("8"));
    expect(await balance(chain.usdc, chain.escrow)).toBe(before.escrow - usd("15"));
    for (const id of ids)
      expect(await chain.read(chain.escrow, MandateEscrowAbi, "holdOf", [id, 0])).toEqual([0n, 0n]);
  });
});

describe("MandateEscrow: signatures", () => {
  it("refuses wrong chain, wrong contract, altered terms, replayed or stale nonce, expiry and malleable signatures", async () => {
    const terms = termsFor();
    const good = await chain.signTerms(customer, terms);
    const send = (t: Terms, signature: Hex) =>
      chain.send(operator, chain.escrow, MandateEscrowAbi, "authorize", [t, signature]);
    expect(await send(terms, await chain.signTerms(customer, terms, chain.escrow, 1))).toEqual(
      failure("InvalidSignature"),
    );
    expect(await send(terms, await chain.signTerms(customer, terms, chain.usdc))).toEqual(
      failure("InvalidSignature"),
    );
    expect(await send({ ...terms, cap: terms.cap + 1n }, good)).toEqual(failure("InvalidSignature"));
    expect(await send({ ...terms, payee: stranger.address }, good)).toEqual(failure("InvalidSignature"));
    expect(await send(terms, await chain.signTerms(stranger, terms))).toEqual(failure("InvalidSignature"));
    // The same signature with s flipped to the upper half of the curve order (malleability).
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = BigInt(`0x${good.slice(66, 130)}`);
    const v = Number.parseInt(good.slice(130, 132), 16);
    const malleable =
      `${good.slice(0, 66)}${toHex(n - s, { size: 32 }).slice(2)}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
    expect(await send(terms, malleable)).toEqual(failure("InvalidSignature"));
    expect((await send(terms, good)).ok).toBe(true);
    expect(await send(terms, good)).toEqual(failure("StaleNonce"));
    const expired = { ...terms, nonce: 5n, deadline: BigInt(chain.clock.now - 1) };
    expect(await send(expired, await chain.signTerms(customer, expired))).toEqual(
      failure("SignatureExpired"),
    );
    const other = { ...terms, nonce: 6n, anchor: terms.anchor + 1n };
    expect(await send(other, await chain.signTerms(customer, other))).toEqual(failure("TermsMismatch"));
    const zeroCap = termsFor({ cap: 0n });
    expect(await send(zeroCap, await chain.signTerms(customer, zeroCap))).toEqual(failure("InvalidTerms"));
    // Stored in 40 and 48 bits: an anchor after the year 36,000 and a hold of 8 million years are refused.
    const farAnchor = termsFor({ anchor: 2n ** 40n });
    expect(await send(farAnchor, await chain.signTerms(customer, farAnchor))).toEqual(
      failure("InvalidTerms"),
    );
    const endlessHold = termsFor({ holdSeconds: 2n ** 48n });
    expect(await send(endlessHold, await chain.signTerms(customer, endlessHold))).toEqual(
      failure("InvalidTerms"),
    );
    const longest = termsFor({ anchor: 2n ** 40n - 1n, holdSeconds: 2n ** 48n - 1n });
    expect((await send(longest, await chain.signTerms(customer, longest))).ok).toBe(true);
    // A mandate id outside the signer's namespace is someone else's: the signature cannot match.
    const foreign = termsFor({ mandateId: mandateIdFor(stranger.address, 1n) });
    expect(await send(foreign, await chain.signTerms(customer, foreign))).toEqual(
      failure("InvalidSignature"),
    );
  });

  it("authorizes with an EIP-2612 permit: no transaction from the customer at all", async () => {
    const gasless = accountAt(6);
    await chain.mint(chain.usdc, gasless.address, usd("100"));
    const terms = termsFor({ mandateId: mandateIdFor(gasless.address, salt++) });
    const nonceBefore = await chain.publicClient.getTransactionCount({ address: gasless.address });
    const permit = await chain.signPermit(gasless, chain.usdc, usd("150"), BigInt(chain.clock.now + 3600));
    const outcome = await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeWithPermit", [
      terms,
      await chain.signTerms(gasless, terms),
      usd("150"),
      BigInt(chain.clock.now + 3600),
      permit.v,
      permit.r,
      permit.s,
    ]);
    expect(outcome.ok).toBe(true);
    expect((await charge(terms.mandateId, usd("50"))).ok).toBe(true);
    expect(await chain.publicClient.getTransactionCount({ address: gasless.address })).toBe(nonceBefore);
  });
});

/** What `authorizeMany` did with each item, from its logs, in order. */
const batchOutcomes = (receipt: TransactionReceipt) =>
  parseEventLogs({ abi: MandateEscrowAbi, logs: receipt.logs })
    .filter((log) => log.eventName === "MandateAuthorized" || log.eventName === "AuthorizationSkipped")
    .map((log) =>
      log.eventName === "MandateAuthorized"
        ? { mandateId: log.args.mandateId, nonce: log.args.nonce, outcome: "authorized" }
        : {
            mandateId: log.args.mandateId,
            nonce: log.args.nonce,
            outcome: ERROR_BY_SELECTOR.get(log.args.reason) ?? log.args.reason,
          },
    );
const ERROR_BY_SELECTOR = new Map(
  MandateEscrowAbi.filter((item) => item.type === "error").map((item) => [
    toFunctionSelector(`${item.name}(${item.inputs.map((input) => input.type).join(",")})`),
    item.name,
  ]),
);
const NO_PERMIT = {
  value: 0n,
  deadline: 0n,
  v: 0,
  r: `0x${"0".repeat(64)}`,
  s: `0x${"0".repeat(64)}`,
} as const;

describe("MandateEscrow: authorizeMany", () => {
  it("records each valid item with its event and skips the others with their error, changing nothing for them", async () => {
    await fund(chain.usdc, usd("1000"));
    const fresh = termsFor();
    const frontRun = termsFor();
    expect((await authorize(frontRun)).ok).toBe(true); // someone sent this one alone first
    const expired = termsFor({ deadline: BigInt(chain.clock.now - 1) });
    const twice = termsFor();
    const twiceAgain = { ...twice, nonce: 2n, cap: usd("20") };
    const forged = termsFor();
    const gasless = accountAt(6);
    await chain.mint(chain.usdc, gasless.address, usd("100"));
    const withPermit = termsFor({ mandateId: mandateIdFor(gasless.address, salt++) });
    const permitDeadline = BigInt(chain.clock.now + 3600);
    const permit = await chain.signPermit(gasless, chain.usdc, usd("150"), permitDeadline);
    const items = [
      [fresh, await chain.signTerms(customer, fresh), NO_PERMIT],
      [frontRun, await chain.signTerms(customer, frontRun), NO_PERMIT],
      [expired, await chain.signTerms(customer, expired), NO_PERMIT],
      [twice, await chain.signTerms(customer, twice), NO_PERMIT],
      [twiceAgain, await chain.signTerms(customer, twiceAgain), NO_PERMIT],
      [forged, await chain.signTerms(stranger, forged), NO_PERMIT],
      [
        withPermit,
        await chain.signTerms(gasless, withPermit),
        { value: usd("150"), deadline: permitDeadline, v: Number(permit.v), r: permit.r, s: permit.s },
      ],
    ] as const;
    const sent = await chain.sendForReceipt(operator, chain.escrow, MandateEscrowAbi, "authorizeMany", [
      items.map(([t]) => t),
      items.map(([, signature]) => signature),
      items.map(([, , p]) => p),
    ]);
    if (!sent.ok) throw new Error(sent.error);
    expect(batchOutcomes(sent.receipt)).toEqual([
      { mandateId: fresh.mandateId, nonce: 1n, outcome: "authorized" },
      { mandateId: frontRun.mandateId, nonce: 1n, outcome: "StaleNonce" },
      { mandateId: expired.mandateId, nonce: 1n, outcome: "SignatureExpired" },
      { mandateId: twice.mandateId, nonce: 1n, outcome: "authorized" },
      { mandateId: twice.mandateId, nonce: 2n, outcome: "authorized" },
      { mandateId: forged.mandateId, nonce: 1n, outcome: "InvalidSignature" },
      { mandateId: withPermit.mandateId, nonce: 1n, outcome: "authorized" },
    ]);
    const mandate = (id: Hex) =>
      chain.read<{ nonce: bigint; cap: bigint; operator: Address }>(
        chain.escrow,
        MandateEscrowAbi,
        "mandate",
        [id],
      );
    expect((await mandate(twice.mandateId)).cap).toBe(usd("20"));
    expect((await mandate(expired.mandateId)).operator).toBe("0x0000000000000000000000000000000000000000");
    expect((await mandate(forged.mandateId)).operator).toBe("0x0000000000000000000000000000000000000000");
    expect(await chain.read<bigint>(chain.usdc, erc20Abi, "allowance", [gasless.address, chain.escrow])).toBe(
      usd("150"),
    );
    expect((await charge(fresh.mandateId, usd("50"))).ok).toBe(true);
    expect((await charge(withPermit.mandateId, usd("50"))).ok).toBe(true);
  });

  it("skips an item whose permit fails and leaves its mandate and allowance as they were", async () => {
    const broke = accountAt(7);
    const terms = termsFor({ mandateId: mandateIdFor(broke.address, salt++) });
    const permitDeadline = BigInt(chain.clock.now + 3600);
    const permit = await chain.signPermit(broke, chain.usdc, usd("150"), permitDeadline);
    const sent = await chain.sendForReceipt(operator, chain.escrow, MandateEscrowAbi, "authorizeMany", [
      [terms],
      [await chain.signTerms(broke, terms)],
      // Signed for 150, presented for 300: the token refuses it, and no allowance stands in for it.
      [{ value: usd("300"), deadline: permitDeadline, v: Number(permit.v), r: permit.r, s: permit.s }],
    ]);
    if (!sent.ok) throw new Error(sent.error);
    expect(batchOutcomes(sent.receipt)).toEqual([
      { mandateId: terms.mandateId, nonce: 1n, outcome: "PermitFailed" },
    ]);
    const stored = await chain.read<{ operator: Address }>(chain.escrow, MandateEscrowAbi, "mandate", [
      terms.mandateId,
    ]);
    expect(stored.operator).toBe("0x0000000000000000000000000000000000000000");
  });

  it("refuses arrays of different lengths", async () => {
    const terms = termsFor();
    expect(
      await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeMany", [
        [terms],
        [await chain.signTerms(customer, terms)],
        [],
      ]),
    ).toEqual(failure("LengthMismatch"));
  });
});

describe("MandateEscrow: reentrancy", () => {
  it("refuses a hostile token's reentrant charge, release and return", async () => {
    const hostile = await chain.deployReentrant();
    await chain.send(customer, hostile, ReentrantTokenAbi, "mint", [customer.address, usd("1000")]);
    await chain.send(customer, hostile, ReentrantTokenAbi, "approve", [chain.escrow, MAX]);
    const direct = termsFor({ token: hostile });
    const held = termsFor({ token: hostile, holdSeconds: 50n });
    await authorize(direct);
    await authorize(held);
    for (const payload of [
      encodeFunctionData({
        abi: MandateEscrowAbi,
        functionName: "charge",
        args: [direct.mandateId, usd("1")],
      }),
      encodeFunctionData({ abi: MandateEscrowAbi, functionName: "release", args: [held.mandateId, 0] }),
      encodeFunctionData({ abi: MandateEscrowAbi, functionName: "returnCharge", args: [held.mandateId, 0] }),
    ]) {
      await chain.send(operator, hostile, ReentrantTokenAbi, "arm", [chain.escrow, payload]);
      expect((await charge(held.mandateId, usd("3"))).ok).toBe(true);
      expect(await chain.read(hostile, ReentrantTokenAbi, "attempted")).toBe(true);
      expect(await chain.read(hostile, ReentrantTokenAbi, "reentrySucceeded")).toBe(false);
      const selector = keccak256(toHex("ReentrancyGuardReentrantCall()")).slice(0, 10);
      expect(await chain.read(hostile, ReentrantTokenAbi, "reentryError")).toBe(selector);
      chain.clock.advance(31 * DAY);
    }
  });
});
