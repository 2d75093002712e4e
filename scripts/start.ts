/**
 * `npm start`: the whole service on this machine. Local chains from the chain config run on anvil,
 * Postgres is embedded (or DATABASE_URL), data lives in .data/ and survives restarts (`npm run reset`
 * wipes it). Ctrl-C stops everything in reverse order.
 */
import { startStack } from "./stack/stack.ts";

const env = process.env;
const logFormat = env.LOG_FORMAT === "json" || env.NODE_ENV === "production" ? "json" : "pretty";
const levels = ["All", "Fatal", "Error", "Warn", "Info", "Debug", "Trace", "None"] as const;
const logLevel = levels.find((l) => l.toLowerCase() === (env.LOG_LEVEL ?? "info").toLowerCase()) ?? "Info";

const port = Number.parseInt(env.PORT ?? "4242", 10);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`PORT must be a port number, got ${JSON.stringify(env.PORT)}`);
  process.exit(2);
}

const verbose = env.STACK_VERBOSE === "1";
console.log("Starting: postgres -> local chain -> contracts -> indexer -> API and workers ...");
const stack = await startStack({
  dataDir: env.DATA_DIR ?? ".data",
  chainsConfig: env.CHAINS_CONFIG ?? "config/chains.json",
  port,
  ...(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL } : {}),
  ...(env.DEV_API_KEY ? { devApiKey: env.DEV_API_KEY } : {}),
  postgresPort: Number.parseInt(env.PG_PORT ?? "54329", 10),
  persistent: true,
  logFormat,
  logLevel,
  onOutput: (source, line) => {
    if (verbose || /error|fatal/i.test(line)) console.log(`[${source}] ${line}`);
  },
}).catch((error: unknown) => {
  console.error(`\nStart failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});

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

Try it:
  curl -s ${stack.apiUrl}/v1/chains -H "Authorization: Bearer ${key}"

Ctrl-C stops everything.`);

let stopping = false;
const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  console.log("\nStopping ...");
  await stack.stop();
  console.log("Stopped.");
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
