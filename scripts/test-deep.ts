/**
 * `npm run test:deep`: the property tests at a nightly size. The whole-system billing model and the
 * escrow's model run at least 100 cases each (the defaults in `npm test` are sized for its time on two
 * cores), the ledger, payment and period properties six to ten times their defaults. A knob already set in the
 * environment wins. Extra arguments go to vitest; the closing line is `npm test`'s `N passed, N failed`.
 */
import { spawnSync } from "node:child_process";

const KNOBS = {
  BILLING_MODEL_RUNS: "100",
  MODEL_RUNS: "150",
  LEDGER_RUNS: "3000",
  PERIOD_RUNS: "4000",
};
const FILES = [
  "test/e2e/subscription-billing-model.test.ts",
  "test/contract/escrow-model.test.ts",
  "test/contract/periods.test.ts",
  "test/unit/ledger.test.ts",
  "test/unit/payment-funds.test.ts",
  "test/unit/payment-machine.test.ts",
];

const started = Date.now();
const env = { ...process.env };
for (const [knob, value] of Object.entries(KNOBS)) env[knob] ??= value;
console.log(
  `test:deep: ${Object.keys(KNOBS)
    .map((knob) => `${knob}=${env[knob]}`)
    .join(" ")}`,
);
const status = spawnSync(process.execPath, ["scripts/test.ts", ...FILES, ...process.argv.slice(2)], {
  stdio: "inherit",
  env,
}).status;
console.log(`test:deep took ${((Date.now() - started) / 60_000).toFixed(1)} min`);
process.exit(status ?? 1);
