import { createServer } from "node:net";

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

/** A port that was free a moment ago (for tests and for PORT=0). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
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
