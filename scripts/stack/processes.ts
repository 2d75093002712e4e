/** Child processes of the local stack: output capture, start failure, ordered stop. */
import type { ChildProcess } from "node:child_process";

export interface Supervised {
  /** Rejects if the process exits; the message carries its last output lines. */
  readonly exited: Promise<never>;
}

/**
 * Forwards each output line, keeps the last ones for the error message of an unexpected exit.
 * Await `exited` in a race with readiness; once ready, the caller stops watching it.
 */
export const supervise = (
  child: ChildProcess,
  name: string,
  onLine: (line: string) => void = () => {},
  keep = 80,
): Supervised => {
  const tail: string[] = [];
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString().split("\n")) {
      if (line.trim() === "") continue;
      tail.push(line);
      if (tail.length > keep) tail.shift();
      onLine(line);
    }
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<never>((_, reject) =>
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code}:\n${tail.join("\n")}`))),
  );
  exited.catch(() => {});
  return { exited };
};

/**
 * Waits until a started child is `ready`. Should it exit first, or the wait fail (a time limit, an
 * aborted start), the child is stopped before the error goes on: a failed start leaves no process.
 */
export const untilReady = async (
  ready: Promise<void>,
  supervised: Supervised,
  stop: () => Promise<void>,
): Promise<void> => {
  try {
    await Promise.race([ready, supervised.exited]);
  } catch (error) {
    await stop();
    throw error;
  }
};

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export const stopChild = (child: ChildProcess, signal: NodeJS.Signals, timeoutMs: number): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
