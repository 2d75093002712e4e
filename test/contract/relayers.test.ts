/**
 * An operator's relayers (`setRelayer`, `setRelayerWithSignature`), on the escrow with Circle's USDC:
 * - a relayer acts for its operator on every mandate and payment naming it (charge, `chargeMany`,
 *   `lowerCap`, `returnCharge`, `returnPayment`), and for no other operator;
 * - rotation: the operator names a new relayer and removes the old one; the same mandate, signed once,
 *   is charged by the new key, and the old key is refused;
 * - the operator's signature, submitted by anyone, names or removes a relayer once, in nonce order;
 * - what a relayer adds to a charge's gas, measured against the operator charging itself.
 */
import {
  concat,
  encodeAbiParameters,
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
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { TestWalletBytecode } from "../../abis/TestWallet.ts";
import type { DepositTerms } from "../../service/payments/deposit-address.ts";
import { depositAddress } from "../../service/payments/deposit-address.ts";
import {
  type Address,
  accountAt,
  type Chain,
  mandateTerms,
  type Outcome,
  type ReceiptOutcome,
  startChain,
  type Terms,
} from "./harness.ts";

const operator = accountAt(1);
const payee = accountAt(2);
const customer = accountAt(3);
const stranger = accountAt(4);
const relayer = accountAt(5);
const nextRelayer = accountAt(6);
const otherOperator = accountAt(7);
const usd = (n: string) => parseUnits(n, 6);
const DAY = 86_400;
const MAX = 2n ** 256n - 1n;

let chain: Chain;
let salt = 1n;

beforeAll(async () => {
  chain = await startChain();
  await chain.mint(chain.usdc, customer.address, usd("100000"));
  await chain.send(customer, chain.usdc, erc20Abi, "approve", [chain.escrow, MAX]);
});
afterAll(async () => {
  await chain?.stop();
});

const failure = (name: string) => ({ ok: false, error: name });
const eventsOf = (outcome: ReceiptOutcome) => {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.error}`);
  return parseEventLogs({ abi: MandateEscrowAbi, logs: outcome.receipt.logs }).map((log) => [
    log.eventName,
    log.args,
  ]);
};
const gasOf = (outcome: Outcome) => {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.error}`);
  return outcome.gasUsed;
};

const signedMandate = async (overrides: Partial<Terms> = {}, operatorAddress: Address = operator.address) => {
  const terms = mandateTerms(
    chain,
    { customer: customer.address, payee: payee.address, operator: operatorAddress },
    salt++,
    { cap: usd("50"), approvalPeriods: 12, ...overrides },
  );
  const outcome = await chain.send(stranger, chain.escrow, MandateEscrowAbi, "authorize", [
    terms,
    await chain.signTerms(customer, terms),
  ]);
  if (!outcome.ok) throw new Error(`authorize: ${outcome.error}`);
  return terms;
};
const charge = (id: Hex, amount: bigint, by = relayer) =>
  chain.send(by, chain.escrow, MandateEscrowAbi, "charge", [id, amount]);
const setRelayer = (who: Address, allowed: boolean, by = operator) =>
  chain.sendForReceipt(by, chain.escrow, MandateEscrowAbi, "setRelayer", [who, allowed]);
const isRelayer = (op: Address, who: Address) =>
  chain.read<boolean>(chain.escrow, MandateEscrowAbi, "isRelayer", [op, who]);
const relayerNonce = (op: Address) =>
  chain.read<bigint>(chain.escrow, MandateEscrowAbi, "relayerNonce", [op]);

describe("MandateEscrow: an operator's relayers", () => {
  it("lets a named relayer charge, lower a cap and return a charge for its operator, and nobody else", async () => {
    const terms = await signedMandate({ holdSeconds: 3n * BigInt(DAY) });
    expect(await charge(terms.mandateId, usd("10"))).toEqual(failure("NotOperator"));
    expect(eventsOf(await setRelayer(relayer.address, true))).toEqual([
      ["RelayerSet", { operator: operator.address, relayer: relayer.address, allowed: true }],
    ]);
    expect(await isRelayer(operator.address, relayer.address)).toBe(true);
    expect((await charge(terms.mandateId, usd("10"))).ok).toBe(true);
    // The relayer of another operator, a stranger, and the operator's relayer naming itself elsewhere.
    expect(eventsOf(await setRelayer(stranger.address, true, otherOperator))).toHaveLength(1);
    chain.clock.advance(32 * DAY);
    expect(await charge(terms.mandateId, usd("10"), stranger)).toEqual(failure("NotOperator"));
    expect(await charge(terms.mandateId, usd("10"), customer)).toEqual(failure("NotOperator"));
    // A relayer cannot name relayers for its operator: setRelayer only ever acts for the caller.
    expect(eventsOf(await setRelayer(stranger.address, true, relayer))).toHaveLength(1);
    expect(await isRelayer(operator.address, stranger.address)).toBe(false);
    expect(await charge(terms.mandateId, usd("10"), stranger)).toEqual(failure("NotOperator"));
    expect((await charge(terms.mandateId, usd("20"))).ok).toBe(true);
    const period = await chain.read<number>(chain.escrow, MandateEscrowAbi, "currentPeriod", [
      terms.mandateId,
    ]);
    expect(
      await chain.send(stranger, chain.escrow, MandateEscrowAbi, "returnCharge", [terms.mandateId, period]),
    ).toEqual(failure("NotOperator"));
    const returned = await chain.sendForReceipt(relayer, chain.escrow, MandateEscrowAbi, "returnCharge", [
      terms.mandateId,
      period,
    ]);
    expect(eventsOf(returned).map(([name]) => name)).toEqual(["Returned"]);
    expect(
      await chain.send(stranger, chain.escrow, MandateEscrowAbi, "lowerCap", [terms.mandateId, usd("30")]),
    ).toEqual(failure("NotOperator"));
    const lowered = await chain.sendForReceipt(relayer, chain.escrow, MandateEscrowAbi, "lowerCap", [
      terms.mandateId,
      usd("30"),
    ]);
    expect(eventsOf(lowered)).toEqual([
      [
        "CapLowered",
        {
          mandateId: terms.mandateId,
          previousCap: usd("50"),
          cap: usd("30"),
          approvalLeft: usd("30") * 12n,
          by: relayer.address,
        },
      ],
    ]);
    // The operator itself still acts, as before relayers.
    chain.clock.advance(32 * DAY);
    expect((await charge(terms.mandateId, usd("30"), operator)).ok).toBe(true);
  });

  it("rotates a relayer key mid-life of a mandate: the same signature is charged by the new key, the old one is refused", async () => {
    const terms = await signedMandate();
    expect((await setRelayer(relayer.address, true)).ok).toBe(true);
    expect((await charge(terms.mandateId, usd("50"))).ok).toBe(true);
    const rotated = [
      ...eventsOf(await setRelayer(nextRelayer.address, true)),
      ...eventsOf(await setRelayer(relayer.address, false)),
    ];
    expect(rotated).toEqual([
      ["RelayerSet", { operator: operator.address, relayer: nextRelayer.address, allowed: true }],
      ["RelayerSet", { operator: operator.address, relayer: relayer.address, allowed: false }],
    ]);
    chain.clock.advance(32 * DAY);
    expect(await charge(terms.mandateId, usd("50"), relayer)).toEqual(failure("NotOperator"));
    expect(
      await chain.send(relayer, chain.escrow, MandateEscrowAbi, "chargeMany", [
        [terms.mandateId],
        [usd("50")],
      ]),
    ).toEqual(failure("NotOperator"));
    expect((await charge(terms.mandateId, usd("50"), nextRelayer)).ok).toBe(true);
    const view = await chain.read<{ nonce: bigint; operator: string }>(
      chain.escrow,
      MandateEscrowAbi,
      "mandate",
      [terms.mandateId],
    );
    // Still the customer's first signature, still naming the operator.
    expect({ nonce: view.nonce, operator: getAddress(view.operator) }).toEqual({
      nonce: 1n,
      operator: operator.address,
    });
    expect((await setRelayer(relayer.address, true)).ok).toBe(true);
    expect((await setRelayer(nextRelayer.address, false)).ok).toBe(true);
  });

  it("lets a relayer return a held payment for the operator named in the deposit terms, and no other", async () => {
    expect((await setRelayer(relayer.address, true)).ok).toBe(true);
    const d: DepositTerms = {
      paymentId: keccak256(toHex(`relayers payment ${salt++}`)),
      payee: payee.address,
      token: chain.usdc,
      operator: operator.address,
      holdSeconds: BigInt(3 * DAY),
    };
    await chain.mint(chain.usdc, depositAddress(chain.escrow, d) as Address, usd("7"));
    expect((await chain.send(stranger, chain.escrow, MandateEscrowAbi, "sweep", [[d]])).ok).toBe(true);
    expect(
      await chain.send(stranger, chain.escrow, MandateEscrowAbi, "returnPayment", [d, customer.address]),
    ).toEqual(failure("NotOperator"));
    const other = { ...d, operator: otherOperator.address };
    expect(
      await chain.send(relayer, chain.escrow, MandateEscrowAbi, "returnPayment", [other, customer.address]),
    ).toEqual(failure("NotOperator"));
    const returned = await chain.sendForReceipt(relayer, chain.escrow, MandateEscrowAbi, "returnPayment", [
      d,
      customer.address,
    ]);
    expect(eventsOf(returned).map(([name]) => name)).toEqual(["PaymentReturned"]);
  });

  it("refuses to name the zero address", async () => {
    expect(await setRelayer(zeroAddress, true)).toEqual(failure("InvalidTerms"));
  });
});

describe("MandateEscrow: setRelayerWithSignature", () => {
  const cold = privateKeyToAccount(keccak256(toHex("cold operator key")));
  const submit = (
    op: Address,
    message: { relayer: Address; allowed: boolean; nonce: bigint; deadline: bigint },
    signature: Hex,
  ) =>
    chain.sendForReceipt(stranger, chain.escrow, MandateEscrowAbi, "setRelayerWithSignature", [
      op,
      message.relayer,
      message.allowed,
      message.nonce,
      message.deadline,
      signature,
    ]);

  it("names a relayer by the operator's signature, submitted by anyone, once and in nonce order; the operator key never needs gas", async () => {
    const deadline = BigInt(chain.clock.now + 600);
    const first = { relayer: relayer.address, allowed: true, nonce: 0n, deadline };
    const second = { relayer: nextRelayer.address, allowed: true, nonce: 1n, deadline };
    const firstSig = await chain.signSetRelayer(cold, first);
    const secondSig = await chain.signSetRelayer(cold, second);
    expect(await submit(cold.address, second, secondSig)).toEqual(failure("StaleNonce"));
    expect(eventsOf(await submit(cold.address, first, firstSig))).toEqual([
      ["RelayerSet", { operator: cold.address, relayer: relayer.address, allowed: true }],
    ]);
    expect(await submit(cold.address, first, firstSig)).toEqual(failure("StaleNonce"));
    expect((await submit(cold.address, second, secondSig)).ok).toBe(true);
    expect(await relayerNonce(cold.address)).toBe(2n);
    expect(await chain.publicClient.getBalance({ address: cold.address })).toBe(0n);
    // The cold operator's mandate is charged by its relayer.
    const terms = await signedMandate({}, cold.address);
    expect((await charge(terms.mandateId, usd("5"))).ok).toBe(true);
    // Removed by signature too.
    const removal = { relayer: relayer.address, allowed: false, nonce: 2n, deadline };
    expect((await submit(cold.address, removal, await chain.signSetRelayer(cold, removal))).ok).toBe(true);
    chain.clock.advance(32 * DAY);
    expect(await charge(terms.mandateId, usd("5"))).toEqual(failure("NotOperator"));
    expect((await charge(terms.mandateId, usd("5"), nextRelayer)).ok).toBe(true);
  });

  it("refuses a forged, moved, altered or expired signature, and the zero operator", async () => {
    const op = privateKeyToAccount(keccak256(toHex("another cold operator")));
    const deadline = BigInt(chain.clock.now + 600);
    const message = { relayer: stranger.address, allowed: true, nonce: 0n, deadline };
    const good = await chain.signSetRelayer(op, message);
    expect(await submit(op.address, message, await chain.signSetRelayer(stranger, message))).toEqual(
      failure("InvalidSignature"),
    );
    expect(
      await submit(op.address, message, await chain.signSetRelayer(op, message, chain.escrow, 1)),
    ).toEqual(failure("InvalidSignature"));
    expect(await submit(op.address, message, await chain.signSetRelayer(op, message, chain.usdc))).toEqual(
      failure("InvalidSignature"),
    );
    expect(await submit(op.address, { ...message, relayer: customer.address }, good)).toEqual(
      failure("InvalidSignature"),
    );
    expect(await submit(op.address, { ...message, deadline: deadline + 1n }, good)).toEqual(
      failure("InvalidSignature"),
    );
    expect(await submit(operator.address, message, good)).toEqual(failure("InvalidSignature"));
    expect(await submit(zeroAddress, message, good)).toEqual(failure("InvalidSignature"));
    const past = { ...message, deadline: BigInt(chain.clock.now - 1) };
    expect(await submit(op.address, past, await chain.signSetRelayer(op, past))).toEqual(
      failure("SignatureExpired"),
    );
    expect(await isRelayer(op.address, stranger.address)).toBe(false);
    expect(await relayerNonce(op.address)).toBe(0n);
    expect((await submit(op.address, message, good)).ok).toBe(true);
  });

  it("takes an ERC-1271 wallet's signature (an operator that is a smart wallet, signed by its owner)", async () => {
    const owner = privateKeyToAccount(keccak256(toHex("operator wallet owner")));
    const wallet = await chain.deploy(
      [],
      concat([TestWalletBytecode, encodeAbiParameters([{ type: "address" }], [owner.address])]),
    );
    const message = {
      relayer: relayer.address,
      allowed: true,
      nonce: 0n,
      deadline: BigInt(chain.clock.now + 600),
    };
    expect(await submit(wallet, message, await chain.signSetRelayer(stranger, message))).toEqual(
      failure("InvalidSignature"),
    );
    expect(eventsOf(await submit(wallet, message, await chain.signSetRelayer(owner, message)))).toEqual([
      ["RelayerSet", { operator: getAddress(wallet), relayer: relayer.address, allowed: true }],
    ]);
  });
});

describe("MandateEscrow: what a relayer adds to a charge's gas", () => {
  it("costs one storage read per transaction, however many charges a batch carries", async () => {
    const ownCharges: Terms[] = [];
    const relayed: Terms[] = [];
    for (let i = 0; i < 5; i++) {
      ownCharges.push(await signedMandate({}, relayer.address));
      relayed.push(await signedMandate());
    }
    expect((await setRelayer(relayer.address, true)).ok).toBe(true);
    // Charges that write the same slots from the same state: one mandate's first charge each.
    const [ownFirst, relayedFirst] = [ownCharges[0], relayed[0]];
    if (!ownFirst || !relayedFirst) throw new Error("no mandates signed");
    const own = gasOf(await charge(ownFirst.mandateId, usd("10"), relayer));
    const viaRelayer = gasOf(await charge(relayedFirst.mandateId, usd("10"), relayer));
    const many = (terms: Terms[]) =>
      chain.send(relayer, chain.escrow, MandateEscrowAbi, "chargeMany", [
        terms.map((t) => t.mandateId),
        terms.map(() => usd("10")),
      ]);
    const ownBatch = gasOf(await many(ownCharges.slice(1)));
    const relayedBatch = gasOf(await many(relayed.slice(1)));
    const single = viaRelayer - own;
    const batch = relayedBatch - ownBatch;
    console.info(
      `relayer gas: single charge ${own} → ${viaRelayer} (+${single}); chargeMany of 4 ${ownBatch} → ${relayedBatch} (+${batch}, +${Number(batch) / 4} per charge)`,
    );
    // A cold mapping read (2,100) and its hashing, once per transaction: a batch of one operator's
    // mandates checks the relayer once.
    expect(single).toBeGreaterThan(2_100n);
    expect(single).toBeLessThan(2_400n);
    expect(batch).toBe(single);
  });
});
