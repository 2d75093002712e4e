/**
 * `npm start`: the whole service on this machine. Local chains from the chain config run on anvil,
 * Postgres is embedded (or DATABASE_URL), data lives in .data/ and survives restarts (`npm run reset`
 * wipes it). Ctrl-C stops everything in reverse order.
 */
import { Effect } from "effect";
import { stackEnvFromEnv } from "../service/config/env.ts";
import type { RunningStack } from "./stack/stack.ts";

// Every variable is checked before anything starts (rules: service/config/env.ts).
const decoded = Effect.runSync(Effect.result(stackEnvFromEnv));
if (decoded._tag === "Failure") {
  console.error(`Refusing to start, bad configuration:\n${decoded.failure.message}`);
  process.exit(2);
}
const env = decoded.success;
// Loaded only now: a refused configuration answers at once, without loading the whole stack.
const { startStack } = await import("./stack/stack.ts");

// Ctrl-C or SIGTERM stops everything, also while the stack is still starting: the start is aborted,
// stops whatever it has started, and only then does this process exit.
const starting = new AbortController();
let running: RunningStack | undefined;
let stopping = false;
const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  console.log("\nStopping ...");
  if (running === undefined) {
    starting.abort(new Error("stopped while starting")); // the start's rejection ends this process
    return;
  }
  await running.stop();
  console.log("Stopped.");
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);

console.log("Starting: postgres -> local chain -> contracts -> indexer -> API and workers ...");
const stack = await startStack({
  dataDir: env.dataDir,
  chainsConfig: env.chainsConfig,
  port: env.port,
  ...(env.databaseUrl ? { databaseUrl: env.databaseUrl } : {}),
  ...(env.devApiKey ? { devApiKey: env.devApiKey } : {}),
  relayerKey: env.relayerKey,
  postgresPort: env.postgresPort,
  persistent: true,
  chainSaveSeconds: env.localChainSaveSeconds,
  restartStalledIndexer: true,
  ...(env.metricsToken ? { metricsToken: env.metricsToken } : {}),
  ...(env.indexerStallSeconds ? { indexerStallSeconds: env.indexerStallSeconds } : {}),
  apiLimits: env.apiLimits,
  logFormat: env.logFormat,
  logLevel: env.logLevel,
  onOutput: (source, line) => {
    if (env.verbose || /error|fatal/i.test(line)) console.log(`[${source}] ${line}`);
  },
  signal: starting.signal,
}).catch((error: unknown) => {
  if (starting.signal.aborted) {
    console.log("Stopped.");
    process.exit(0);
  }
  console.error(`\nStart failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
running = stack;

const key = stack.devMerchant.apiKey;
console.log(`
Ready in ${(stack.timings.service_ready ?? 0) / 1000} s  (${Object.entries(stack.timings)
  .map(([step, ms]) => `${step} ${ms} ms`)
  .join(", ")})

  API          ${stack.apiUrl}/v1      (reference: ${stack.apiUrl}/docs)
  Merchant     ${stack.devMerchant.merchantId}
  Test API key ${key}
  Chains       ${stack.chains.map((c) => `${c.id} ${c.name} (${c.livemode ? "live" : "test"}) ${c.rpc?.http[0] ?? ""}`).join("\n               ")}
  Database     ${stack.databaseUrl.replace(/:[^:@/]+@/, ":***@")}
  Metrics      curl -s ${stack.apiUrl}/metrics -H "Authorization: Bearer ${stack.metricsToken}"

Try it:
  curl -s ${stack.apiUrl}/v1/chains -H "Authorization: Bearer ${key}"

Ctrl-C stops everything.`);
