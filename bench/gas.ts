/**
 * `npm run bench:gas`: gas used by each MandateEscrow operation on anvil, in steady state (payee and
 * escrow already hold tokens; every customer is a separate account with a balance and an allowance).
 * One-time payments: sweeps of deposit addresses (first sweep deploys the address's clone; a top-up
 * finds it deployed), payment releases and returns, the test token's EIP-3009 transferWithAuthorization,
 * and plain ERC-20 transfers measured in the same run for comparison. Changing a cap (a raise by the
 * customer's re-signature with a permit; `lowerCap`) and revoking by signature, beside a plain `revoke`.
 * Prints a table with the targets and writes bench/results/gas.json (bench/report.ts shape: the issue's
 * figures as summary rows beside their published anchors or same-run baselines, and every
 * operation's gas in `operations`). `node bench/gas-trace.ts` shows where each operation's gas goes.
 */
import { erc20Abi, type Hex, keccak256, parseUnits, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { usdcAbi } from "../scripts/stack/circle-usdc.ts";
import { type DepositTerms, depositAddress } from "../service/payments/deposit-address.ts";
import { accountAt, mandateTerms, startChain, type Terms } from "../test/contract/harness.ts";
import { ratioTo, type SummaryRow, writeResults } from "./report.ts";

const DAY = 86_400;
const usd = (n: string) => parseUnits(n, 6);
const MAX = 2n ** 256n - 1n;

const chain = await startChain();
const operator = accountAt(1);
const payee = accountAt(2);
let saltCounter = 1n;
let customerCounter = 0;

const newCustomer = async () => {
  const account = privateKeyToAccount(keccak256(toHex(`bench customer ${customerCounter++}`)));
  await chain.testClient.setBalance({ address: account.address, value: 10n ** 18n });
  await chain.mint(chain.usdc, account.address, usd("100000"));
  return account;
};

const ZERO_WORD = `0x${"0".repeat(64)}` as const;
const newTerms = (customer: `0x${string}`, holdSeconds: bigint): Terms =>
  mandateTerms(chain, { customer, payee: payee.address, operator: operator.address }, saltCounter++, {
    holdSeconds,
  });

const gasOf = (outcome: Awaited<ReturnType<typeof chain.send>>, what: string): number => {
  if (!outcome.ok) throw new Error(`${what} failed: ${outcome.error}`);
  return Number(outcome.gasUsed);
};

/** A customer who approved the escrow with a transaction, and a mandate signed but not yet submitted. */
const prepared = async (holdSeconds: bigint) => {
  const customer = await newCustomer();
  await chain.send(customer, chain.usdc, erc20Abi, "approve", [chain.escrow, MAX]);
  const terms = newTerms(customer.address, holdSeconds);
  return { customer, terms, signature: await chain.signTerms(customer, terms) };
};

const authorized = async (holdSeconds: bigint) => {
  const p = await prepared(holdSeconds);
  gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorize", [p.terms, p.signature]),
    "authorize",
  );
  return p.terms.mandateId;
};

// Steady state: the payee and the escrow already hold some of the token.
await chain.mint(chain.usdc, payee.address, usd("1"));
const warm = await authorized(3600n);
gasOf(
  await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [warm, usd("1")]),
  "warm-up charge",
);

const results: Record<string, number> = {};

{
  const p = await prepared(0n);
  results.authorize = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorize", [p.terms, p.signature]),
    "authorize",
  );
}
{
  const customer = await newCustomer();
  const terms = newTerms(customer.address, 0n);
  const permit = await chain.signPermit(customer, chain.usdc, usd("1200"), BigInt(chain.clock.now + DAY));
  results.authorize_with_permit = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeWithPermit", [
      terms,
      await chain.signTerms(customer, terms),
      usd("1200"),
      BigInt(chain.clock.now + DAY),
      permit.v,
      permit.r,
      permit.s,
    ]),
    "authorizeWithPermit",
  );
}
results.charge_without_hold = gasOf(
  await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [await authorized(0n), usd("50")]),
  "charge",
);
const heldId = await authorized(3600n);
results.charge_with_hold = gasOf(
  await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [heldId, usd("50")]),
  "charge",
);

const batch = async (size: number, holdSeconds: bigint) => {
  const ids = [];
  for (let i = 0; i < size; i++) ids.push(await authorized(holdSeconds));
  const gas = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "chargeMany", [ids, ids.map(() => usd("50"))]),
    `chargeMany(${size})`,
  );
  return { ids, perCharge: Math.round(gas / size) };
};
results.batch_charge_10_without_hold_per_charge = (await batch(10, 0n)).perCharge;
results.batch_charge_50_without_hold_per_charge = (await batch(50, 0n)).perCharge;
results.batch_charge_10_with_hold_per_charge = (await batch(10, 3600n)).perCharge;
const held50 = await batch(50, 3600n);
results.batch_charge_50_with_hold_per_charge = held50.perCharge;

const toReturn = await authorized(3600n);
gasOf(await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [toReturn, usd("50")]), "charge");
results.return = gasOf(
  await chain.send(operator, chain.escrow, MandateEscrowAbi, "returnCharge", [toReturn, 0]),
  "return",
);

chain.clock.advance(3600);
results.release = gasOf(
  await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "release", [heldId, 0]),
  "release",
);
results.batch_release_50_per_release = Math.round(
  gasOf(
    await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "releaseMany", [
      held50.ids,
      held50.ids.map(() => 0),
    ]),
    "releaseMany(50)",
  ) / 50,
);
// The same 50 again, all released already: what a charge passed over costs (a batch front-run by anyone).
results.batch_release_50_passed_over_per_item = Math.round(
  gasOf(
    await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "releaseMany", [
      held50.ids,
      held50.ids.map(() => 0),
    ]),
    "releaseMany(50) passed over",
  ) / 50,
);

// A mandate's later periods: a held charge after the previous hold was released (the usual month), and one
// that finds the previous hold still open (a hold longer than a period), which moves that hold aside.
{
  const monthly = await authorized(3600n);
  gasOf(await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [monthly, usd("50")]), "charge");
  const longHold = await authorized(BigInt(40 * DAY));
  gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [longHold, usd("50")]),
    "charge",
  );
  chain.clock.advance(3600);
  gasOf(await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "release", [monthly, 0]), "release");
  chain.clock.advance(31 * DAY);
  results.charge_with_hold_next_period_after_release = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [monthly, usd("50")]),
    "charge",
  );
  results.charge_with_hold_over_open_hold = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [longHold, usd("50")]),
    "charge",
  );
  chain.clock.advance(10 * DAY);
  results.release_of_hold_moved_aside = gasOf(
    await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "release", [longHold, 0]),
    "release",
  );
}

// ---------------------------------------------------------------- one-time payments

let paymentCounter = 0;
const newDeposit = (holdSeconds: bigint): DepositTerms => ({
  paymentId: keccak256(toHex(`bench payment ${paymentCounter++}`)),
  payee: payee.address,
  token: chain.usdc,
  operator: operator.address,
  holdSeconds,
});
/** A payer (a customer account holding the token) pays a deposit address by a plain transfer. */
const payer = await newCustomer();
const pay = async (d: DepositTerms, amount = usd("50")) =>
  gasOf(
    await chain.send(payer, chain.usdc, erc20Abi, "transfer", [depositAddress(chain.escrow, d), amount]),
    "payer transfer",
  );
const sweep = async (deposits: DepositTerms[], what: string) =>
  gasOf(await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "sweep", [deposits]), what);

const direct = newDeposit(0n);
await pay(direct);
results.sweep_first_without_hold = await sweep([direct], "sweep");
const held = newDeposit(3600n);
await pay(held);
results.sweep_first_with_hold = await sweep([held], "sweep");
await pay(direct);
results.sweep_top_up_without_hold = await sweep([direct], "top-up sweep");
await pay(held);
results.sweep_top_up_with_hold = await sweep([held], "top-up sweep");

const sweepBatch = async (holdSeconds: bigint) => {
  const deposits = Array.from({ length: 50 }, () => newDeposit(holdSeconds));
  for (const d of deposits) await pay(d);
  return { deposits, perPayment: Math.round((await sweep(deposits, "sweep(50)")) / 50) };
};
results.batch_sweep_50_without_hold_per_payment = (await sweepBatch(0n)).perPayment;
const heldPayments = await sweepBatch(3600n);
results.batch_sweep_50_with_hold_per_payment = heldPayments.perPayment;

const toReturnPayment = newDeposit(3600n);
await pay(toReturnPayment);
await sweep([toReturnPayment], "sweep");
results.return_payment = gasOf(
  await chain.send(operator, chain.escrow, MandateEscrowAbi, "returnPayment", [
    toReturnPayment,
    payer.address,
  ]),
  "returnPayment",
);
chain.clock.advance(3600);
results.release_payment = gasOf(
  await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "releasePayments", [[held]]),
  "releasePayments",
);
results.batch_release_payments_50_per_payment = Math.round(
  gasOf(
    await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "releasePayments", [
      heldPayments.deposits,
    ]),
    "releasePayments(50)",
  ) / 50,
);
results.batch_release_payments_50_passed_over_per_item = Math.round(
  gasOf(
    await chain.send(accountAt(7), chain.escrow, MandateEscrowAbi, "releasePayments", [
      heldPayments.deposits,
    ]),
    "releasePayments(50) passed over",
  ) / 50,
);

// For comparison, in the same run: the payer's own transfer, and the relayer submitting it for a payer
// without gas (EIP-3009). Each sender keeps a balance; "fresh" recipients held nothing before.
const freshAddress = (label: string) => privateKeyToAccount(keccak256(toHex(label))).address;
results.erc20_transfer_to_fresh_address = gasOf(
  await chain.send(payer, chain.usdc, erc20Abi, "transfer", [freshAddress("bench fresh 1"), usd("50")]),
  "transfer",
);
results.erc20_transfer_to_holder = gasOf(
  await chain.send(payer, chain.usdc, erc20Abi, "transfer", [payee.address, usd("50")]),
  "transfer",
);
{
  const gasless = await newCustomer();
  const authorization = {
    from: gasless.address,
    to: depositAddress(chain.escrow, newDeposit(0n)) as `0x${string}`,
    value: usd("50"),
    validAfter: 0n,
    validBefore: BigInt(chain.clock.now + DAY),
    nonce: keccak256(toHex("bench authorization")) as Hex,
  };
  const { v, r, s } = await chain.signAuthorization(gasless, chain.usdc, authorization);
  results.usdc_transfer_with_authorization_to_fresh_address = gasOf(
    await chain.send(operator, chain.usdc, usdcAbi, "transferWithAuthorization", [
      authorization.from,
      authorization.to,
      authorization.value,
      authorization.validAfter,
      authorization.validBefore,
      authorization.nonce,
      v,
      r,
      s,
    ]),
    "transferWithAuthorization",
  );
}
// Last, so the customers and salts of every figure above stay those of earlier runs.
/** Authorisations of fresh customers in one `authorizeMany`, with EIP-2612 permits or after an approve. */
const authorizeMany = async (size: number, withPermits: boolean) => {
  const terms: Terms[] = [];
  const signatures: `0x${string}`[] = [];
  const permits = [];
  for (let i = 0; i < size; i++) {
    const customer = await newCustomer();
    if (!withPermits) await chain.send(customer, chain.usdc, erc20Abi, "approve", [chain.escrow, MAX]);
    const t = newTerms(customer.address, 0n);
    terms.push(t);
    signatures.push(await chain.signTerms(customer, t));
    const deadline = BigInt(chain.clock.now + DAY);
    const permit = withPermits
      ? await chain.signPermit(customer, chain.usdc, usd("1200"), deadline)
      : undefined;
    permits.push(
      permit
        ? { value: usd("1200"), deadline, v: permit.v, r: permit.r, s: permit.s }
        : { value: 0n, deadline: 0n, v: 0, r: ZERO_WORD, s: ZERO_WORD },
    );
  }
  const gas = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeMany", [terms, signatures, permits]),
    `authorizeMany(${size})`,
  );
  return Math.round(gas / size);
};
results.batch_authorize_50_per_authorization = await authorizeMany(50, false);
results.batch_authorize_50_with_permit_per_authorization = await authorizeMany(50, true);

// Changing a mandate's cap, and a gasless revocation (after the rest, for the same reason). Each on a
// mandate signed with a permit (cap 100 × 12) and charged once in its first period.
const signedWithPermit = async () => {
  const customer = await newCustomer();
  const terms = newTerms(customer.address, 0n);
  const deadline = BigInt(chain.clock.now + DAY);
  const permit = await chain.signPermit(customer, chain.usdc, usd("1200"), deadline);
  gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeWithPermit", [
      terms,
      await chain.signTerms(customer, terms),
      usd("1200"),
      deadline,
      permit.v,
      permit.r,
      permit.s,
    ]),
    "authorizeWithPermit",
  );
  gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "charge", [terms.mandateId, usd("50")]),
    "charge",
  );
  return { customer, terms };
};
/** The customer's re-signature at a higher cap (nonce 2) with a permit for the new total approval. */
const raised = async ({ customer, terms }: Awaited<ReturnType<typeof signedWithPermit>>) => {
  const deadline = BigInt(chain.clock.now + DAY);
  const next = { ...terms, cap: usd("160"), nonce: 2n, deadline };
  const permit = await chain.signPermit(customer, chain.usdc, usd("1920"), deadline);
  return { next, signature: await chain.signTerms(customer, next), permit, deadline };
};
{
  const r = await raised(await signedWithPermit());
  results.raise_cap_with_permit = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeWithPermit", [
      r.next,
      r.signature,
      usd("1920"),
      r.deadline,
      r.permit.v,
      r.permit.r,
      r.permit.s,
    ]),
    "raise by authorizeWithPermit",
  );
}
{
  // As the relayer sends it: a group of one in authorizeMany.
  const r = await raised(await signedWithPermit());
  results.raise_cap_with_permit_in_authorize_many_of_1 = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "authorizeMany", [
      [r.next],
      [r.signature],
      [{ value: usd("1920"), deadline: r.deadline, v: r.permit.v, r: r.permit.r, s: r.permit.s }],
    ]),
    "raise by authorizeMany",
  );
}
{
  const { terms } = await signedWithPermit();
  results.lower_cap = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "lowerCap", [terms.mandateId, usd("60")]),
    "lowerCap",
  );
}
{
  const { customer, terms } = await signedWithPermit();
  const deadline = BigInt(chain.clock.now + DAY);
  results.revoke_with_signature = gasOf(
    await chain.send(operator, chain.escrow, MandateEscrowAbi, "revokeWithSignature", [
      terms.mandateId,
      deadline,
      await chain.signRevocation(customer, terms.mandateId, deadline),
    ]),
    "revokeWithSignature",
  );
  const other = await signedWithPermit();
  results.revoke_by_customer = gasOf(
    await chain.send(other.customer, chain.escrow, MandateEscrowAbi, "revoke", [other.terms.mandateId]),
    "revoke",
  );
}

await chain.stop();

/**
 * Gas is deterministic, so its targets stay absolute (the team's ratio rule is for times on a shared
 * machine); each row's `ratio` is to its anchor: a published figure of the field or a same-run baseline.
 */
const row = (
  what: string,
  name: string,
  target: number,
  baseline: number | null,
  baselineWhat: string | null,
): SummaryRow => {
  const figure = results[name] as number;
  return {
    what: `gas: ${what}`,
    figure,
    unit: "gas",
    baseline,
    baseline_what: baselineWhat,
    ratio: ratioTo(figure, baseline),
    target: `≤ ${target.toLocaleString("en-US")}`,
    meets_target: figure <= target,
  };
};
const summary: SummaryRow[] = [
  row("charge without hold", "charge_without_hold", 60_000, 165_167, "AuthCaptureEscrow charge, published"),
  row(
    "charge with hold",
    "charge_with_hold",
    80_000,
    155_657 + 69_915,
    "AuthCaptureEscrow authorize + capture, published",
  ),
  row(
    "chargeMany of 50 with hold, per charge",
    "batch_charge_50_with_hold_per_charge",
    45_000,
    results.batch_charge_50_without_hold_per_charge as number,
    "the same batch without hold, same run",
  ),
  row("release", "release", 45_000, 52_475, "Permit2 transferFrom, published"),
  row(
    "releaseMany of 50, per release",
    "batch_release_50_per_release",
    15_000,
    results.release as number,
    "one release per transaction, same run",
  ),
];
writeResults("gas", "npm run bench:gas", summary, {
  solc: "0.8.37, optimizer 10000 runs, via-IR, evm cancun",
  conditions:
    "anvil; payee and escrow already hold the token; each customer a separate account with an allowance; each mandate freshly authorized and charged in its first period unless named otherwise; each deposit address fresh (its first sweep deploys its clone) except for top-ups; payers keep a balance after paying",
  operations: results,
});
console.log("| operation | gas |\n|---|---:|");
for (const [name, gas] of Object.entries(results))
  console.log(`| ${name} | ${gas.toLocaleString("en-US")} |`);
console.log("\n| operation | gas | token transfer | ratio | target | meets |\n|---|---:|---:|---:|---|---|");
for (const r of summary)
  console.log(
    `| ${r.what} | ${r.figure.toLocaleString("en-US")} | ${r.baseline?.toLocaleString("en-US") ?? ""} | ${r.ratio} | ${r.target} | ${r.meets_target ? "yes" : "NO"} |`,
  );
console.log("\nwritten to bench/results/gas.json");
