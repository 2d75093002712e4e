/**
 * `npm run fuzz -- --requests 100000 [--seed N] [--concurrency 16] [--url http://… --key sk_test_…]`:
 * the API fuzzer (scripts/fuzz/api-fuzzer.ts) against a stack of its own (started as the benchmarks
 * start theirs) or a running one. Prints the figures; exits non-zero on any 5xx or malformed 4xx.
 */
import { parseArgs } from "node:util";
import { benchChain } from "../bench/local-chain-config.ts";
import { formatReport, runFuzz } from "./fuzz/api-fuzzer.ts";
import { startScratchStack, stopOnSignal } from "./stack/scratch-stack.ts";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "10000" },
    seed: { type: "string" },
    concurrency: { type: "string", default: "16" },
    url: { type: "string" },
    key: { type: "string" },
  },
});
if ((values.url === undefined) !== (values.key === undefined)) {
  console.error("--url and --key go together");
  process.exit(2);
}
const requests = Number(values.requests);
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);

let stop = async () => {};
let baseUrl = values.url;
let key = values.key;
if (baseUrl === undefined) {
  const scratch = await startScratchStack("fuzz", { chains: [benchChain("fuzz")] });
  const { stack } = scratch;
  stop = scratch.stop;
  stopOnSignal(scratch);
  baseUrl = stack.apiUrl;
  key = stack.devMerchant.apiKey;
  console.log(`stack up at ${baseUrl}`);
}

let failed = true;
try {
  const report = await runFuzz({
    baseUrl,
    key: key as string,
    requests,
    seed,
    concurrency: Number(values.concurrency),
    onProgress: (done) => console.log(`  ${done} requests…`),
  });
  console.log(formatReport(report));
  failed = report.findings.length > 0;
} finally {
  await stop();
}
process.exit(failed ? 1 : 0);
