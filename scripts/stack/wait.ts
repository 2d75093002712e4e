import { randomInt } from "node:crypto";
import { closeSync, mkdirSync, openSync, readFileSync, statSync, utimesSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const waitFor = async (
  check: () => Promise<boolean>,
  options: {
    readonly timeoutMs: number;
    readonly what: string;
    readonly intervalMs?: number;
    /** Gives up at once when aborted (with the signal's reason). */
    readonly signal?: AbortSignal | undefined;
  },
): Promise<void> => {
  const deadline = Date.now() + options.timeoutMs;
  while (Date.now() < deadline) {
    options.signal?.throwIfAborted();
    if (await check()) return;
    await sleep(options.intervalMs ?? 50);
  }
  throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what}`);
};

/** Whether `port` can be listened on at 127.0.0.1 right now. */
const listenable = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });

/** The lowest port the kernel hands out for outgoing connections and `listen(0)` (Linux; 32768 elsewhere). */
const ephemeralStart = (): number => {
  try {
    const first = Number.parseInt(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"), 10);
    return Number.isInteger(first) ? first : 32_768;
  } catch {
    return 32_768;
  }
};

// Above every port of the Fetch standard's "bad port" list (the highest is 10080), to which fetch and
// browsers refuse to connect: a stack on 10080 never answered its readiness probe.
const LOWEST = 10_100;

// A port handed out is often bound much later (a stack's service port, once Postgres, the chain and the
// indexer are up), and until then it looks free to every other caller: parallel test files and the
// stacks they spawn would sometimes pick the same one. So each pick is claimed, machine-wide, by a file
// created exclusively; another caller skips it until the claim is CLAIM_MS old.
const CLAIM_MS = 15 * 60_000;
const claimDir = join(tmpdir(), `billing-free-ports-${process.getuid?.() ?? "user"}`);

/** Whether this caller may hand out `port`: true when it created the claim, or renewed a stale one. */
const claim = (port: number): boolean => {
  const file = join(claimDir, String(port));
  try {
    mkdirSync(claimDir, { recursive: true, mode: 0o700 });
    closeSync(openSync(file, "wx"));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") return true; // no claims possible here: best effort
    try {
      if (Date.now() - statSync(file).mtimeMs < CLAIM_MS) return false;
      const now = new Date();
      utimesSync(file, now, now);
      return true;
    } catch {
      return false;
    }
  }
};

/**
 * A port that was free a moment ago (for tests and for PORT=0), chosen below the kernel's ephemeral
 * range: a port from `listen(0)` is released before its user binds it, and meanwhile any outgoing
 * connection on the machine (a parallel test's, say) could take it as its local port. Claimed so that
 * no other `freePort` on the machine returns it for a while (`claim`).
 */
export const freePort = async (): Promise<number> => {
  const span = ephemeralStart() - LOWEST;
  for (let attempt = 0; span > 1_000 && attempt < 50; attempt++) {
    const port = LOWEST + randomInt(span);
    if ((await listenable(port)) && claim(port)) return port;
  }
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
};
