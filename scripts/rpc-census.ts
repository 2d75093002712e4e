/**
 * The RPC requests an idle stack sends per minute to a chain: one local chain behind a counting proxy
 * (scripts/stack/rpc-proxy.ts), counted over a window with one service process, then over another with a
 * second service process on the same database (a replica). Each JSON-RPC call counts once, a batch as
 * its calls; the WebSocket's subscription calls are counted apart, its notifications not at all.
 *
 *   npm run rpc-census [-- --seconds 60] [--no-ws] [--urls 2]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { LOCAL_RELAYER_KEY } from "./stack/local-chain.ts";
import { processLabels } from "./stack/rpc-clients.ts";
import { type RpcProxy, startRpcProxy } from "./stack/rpc-proxy.ts";
import { localChain, startScratchStack, stopOnSignal } from "./stack/scratch-stack.ts";
import { freePort, waitFor } from "./stack/wait.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    // The chain without its WebSocket URL: the service and the indexer poll for heads.
    "no-ws": { type: "boolean", default: false },
    // The chain's URL listed this many times (each its own proxy): the lag check reads every URL's head.
    urls: { type: "string", default: "1" },
  },
});
const seconds = Number(values.seconds);
const urlCount = Math.max(1, Number(values.urls));

const clients = processLabels();

const proxies: RpcProxy[] = [];
const scratch = await startScratchStack("rpc-census", {
  chains: [localChain({ name: "Census chain" })],
  logLevel: "Error",
  rpcInFront: async (_chainId, anvil) => {
    for (let i = 0; i < urlCount; i++) proxies.push(await startRpcProxy(anvil, {}, clients.label));
    const [first, ...others] = proxies.map((p) => p.http);
    if (first === undefined) throw new Error("no proxy");
    return { http: [first, ...others], ...(values["no-ws"] ? {} : { ws: proxies[0]?.ws }) };
  },
});
stopOnSignal(scratch);
const { stack } = scratch;
clients.name("service 1", () => process.pid);
clients.name("indexer", () => stack.ponderPid());

/** The proxies' counts summed. */
const total = () => {
  const sum = {
    httpRequests: 0,
    calls: 0,
    wsCalls: 0,
    byClient: {} as Record<string, number>,
    byMethod: {} as Record<string, number>,
  };
  for (const counts of proxies.map((p) => p.counts())) {
    sum.httpRequests += counts.httpRequests;
    sum.calls += counts.calls;
    sum.wsCalls += counts.wsCalls;
    for (const [k, n] of Object.entries(counts.byClient)) sum.byClient[k] = (sum.byClient[k] ?? 0) + n;
    for (const [k, n] of Object.entries(counts.byMethod)) sum.byMethod[k] = (sum.byMethod[k] ?? 0) + n;
  }
  return sum;
};

const window = async (what: string) => {
  // Start-up settles first: the indexer's catch-up blocks, the first passes of every worker.
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  for (const proxy of proxies) proxy.resetCounts();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const counts = total();
  const perMinute = (n: number) => Math.round((n * 60) / seconds);
  console.log(
    `\n${what} (${urlCount} URL${urlCount > 1 ? "s" : ""}, ${values["no-ws"] ? "no WebSocket" : "WebSocket"}): ${perMinute(counts.calls)} calls/min (${perMinute(counts.httpRequests)} HTTP requests/min), ${counts.wsCalls} WebSocket calls in ${seconds} s`,
  );
  for (const [client, n] of Object.entries(counts.byClient).sort(([a], [b]) => a.localeCompare(b)))
    console.log(`  ${client}: ${perMinute(n)}/min`);
  for (const [method, n] of Object.entries(counts.byMethod).sort(([, a], [, b]) => b - a))
    console.log(`    ${method}: ${perMinute(n)}/min`);
};

const children: ChildProcess[] = [];
try {
  await window("one service process");
  const port = await freePort();
  const child = spawn(process.execPath, ["service/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: stack.databaseUrl,
      CHAINS_CONFIG: stack.chainsFile,
      WEBHOOK_SECRETS_KEY: stack.webhookSecretsKey,
      PONDER_URL: stack.ponderUrl,
      PORT: String(port),
      LOG_LEVEL: "Error",
      RELAYER_PRIVATE_KEY: LOCAL_RELAYER_KEY,
    },
    stdio: "ignore",
  });
  children.push(child);
  clients.name("service 2", () => child.pid);
  await waitFor(
    async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200,
    { timeoutMs: 60_000, what: "the second service process" },
  );
  await window("two service processes");
} finally {
  for (const child of children) child.kill("SIGTERM");
  await scratch.stop();
  for (const proxy of proxies) await proxy.stop();
}
