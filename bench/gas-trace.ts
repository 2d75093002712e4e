/**
 * `node bench/gas-trace.ts`: where the gas of each escrow operation goes. Runs the gas bench's main
 * operations on anvil, replays each with `debug_traceTransaction` (struct logs) and prints the gas by
 * contract (escrow, token) and kind of opcode (storage reads and writes, calls, logs, hashing, the rest),
 * next to the intrinsic cost (21,000 + calldata) and the refund. The profile behind the gas floors in
 * docs/performance.md, "Derived limits".
 */
import { erc20Abi, type Hex, keccak256, parseUnits, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { accountAt, mandateTerms, startChain } from "../test/contract/harness.ts";

interface Step {
  readonly op: string;
  readonly gas: number;
  readonly gasCost: number;
  readonly depth: number;
}

const _DAY = 86_400;
const usd = (n: string) => parseUnits(n, 6);
const MAX = 2n ** 256n - 1n;
const CALLS = new Set(["CALL", "STATICCALL", "DELEGATECALL", "CALLCODE"]);

const kindOf = (op: string): string => {
  if (op === "SLOAD" || op === "SSTORE" || op === "TLOAD" || op === "TSTORE") return op;
  if (CALLS.has(op)) return "CALL (own cost)";
  if (op.startsWith("LOG")) return "LOG";
  if (op === "KECCAK256") return "KECCAK256";
  return "other";
};

/** Self gas of every step: a call's own cost excludes what its callee spent. */
const profile = (steps: readonly Step[]) => {
  const byKey = new Map<string, number>();
  const counts = new Map<string, number>();
  const add = (key: string, gas: number) => byKey.set(key, (byKey.get(key) ?? 0) + gas);
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i] as Step;
    const next = steps[i + 1];
    let cost = step.gasCost;
    if (CALLS.has(step.op) && next !== undefined && next.depth > step.depth) {
      let j = i + 1;
      while (j < steps.length && (steps[j] as Step).depth > step.depth) j++;
      const after = steps[j];
      const last = steps[j - 1] as Step;
      const calleeSpent = next.gas - (last.gas - last.gasCost);
      cost = after === undefined ? step.gasCost : step.gas - after.gas - calleeSpent;
    } else if (next !== undefined && next.depth === step.depth) cost = step.gas - next.gas;
    const where = step.depth === 1 ? "escrow" : "token";
    const key = `${where} ${kindOf(step.op)}`;
    add(key, cost);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return { byKey, counts };
};

const chain = await startChain({ stepsTracing: true });
const operator = accountAt(1);
const payee = accountAt(2);
let salt = 1n;
let customers = 0;

const authorized = async (holdSeconds: bigint) => {
  const customer = privateKeyToAccount(keccak256(toHex(`trace customer ${customers++}`)));
  await chain.testClient.setBalance({ address: customer.address, value: 10n ** 18n });
  await chain.mint(chain.usdc, customer.address, usd("100000"));
  await chain.send(customer, chain.usdc, erc20Abi, "approve", [chain.escrow, MAX]);
  const terms = mandateTerms(
    chain,
    { customer: customer.address, payee: payee.address, operator: operator.address },
    salt++,
    { holdSeconds },
  );
  const outcome = await chain.sendForReceipt(operator, chain.escrow, MandateEscrowAbi, "authorize", [
    terms,
    await chain.signTerms(customer, terms),
  ]);
  if (!outcome.ok) throw new Error(`authorize: ${outcome.error}`);
  return { id: terms.mandateId, hash: outcome.receipt.transactionHash };
};

const traced: { what: string; hash: Hex; gasUsed: bigint }[] = [];
const run = async (what: string, functionName: string, args: readonly unknown[], from = operator) => {
  const outcome = await chain.sendForReceipt(from, chain.escrow, MandateEscrowAbi, functionName, args);
  if (!outcome.ok) throw new Error(`${what}: ${outcome.error}`);
  traced.push({ what, hash: outcome.receipt.transactionHash, gasUsed: outcome.gasUsed });
};

// Steady state as in bench/gas.ts: payee and escrow already hold the token.
await chain.mint(chain.usdc, payee.address, usd("1"));
await run("warm-up charge", "charge", [(await authorized(3600n)).id, usd("1")]);
const fresh = await authorized(0n);
traced.push({ what: "authorize", hash: fresh.hash, gasUsed: 0n });
await run("charge without hold", "charge", [fresh.id, usd("50")]);
const held = (await authorized(3600n)).id;
await run("charge with hold", "charge", [held, usd("50")]);
const batch = [];
for (let i = 0; i < 10; i++) batch.push((await authorized(3600n)).id);
await run("chargeMany(10) with hold", "chargeMany", [batch, batch.map(() => usd("50"))]);
chain.clock.advance(3600);
await run("release", "release", [held, 0], accountAt(7));
await run("releaseMany(10)", "releaseMany", [batch, batch.map(() => 0)], accountAt(7));

for (const { what, hash } of traced) {
  const receipt = await chain.publicClient.getTransactionReceipt({ hash });
  const tx = await chain.publicClient.getTransaction({ hash });
  const trace = (await chain.publicClient.request({
    method: "debug_traceTransaction" as never,
    params: [
      hash,
      { disableStorage: true, disableStack: true, enableMemory: false, enableReturnData: false },
    ] as never,
  })) as { gas: number; structLogs: Step[] };
  if (trace.structLogs === undefined || trace.structLogs.length === 0) {
    console.log(JSON.stringify(trace).slice(0, 500));
    continue;
  }
  const data = Buffer.from(tx.input.slice(2), "hex");
  const calldata = data.reduce((sum, byte) => sum + (byte === 0 ? 4 : 16), 0);
  const first = trace.structLogs[0] as Step;
  const executed = trace.structLogs.reduce((_, s) => s, first);
  const execution = first.gas - (executed.gas - executed.gasCost);
  const gross = 21_000 + calldata + execution;
  const { byKey, counts } = profile(trace.structLogs);
  console.log(
    `\n## ${what}: gasUsed ${receipt.gasUsed} (gross ${gross}, refund ${gross - Number(receipt.gasUsed)})`,
  );
  console.log(`  intrinsic 21000 + calldata ${calldata} (${data.length} bytes)`);
  for (const [key, gas] of [...byKey].sort((a, b) => b[1] - a[1]))
    console.log(`  ${key.padEnd(28)} ${String(gas).padStart(7)}  (${counts.get(key)} ops)`);
}
await chain.stop();
