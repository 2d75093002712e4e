/**
 * Which local process a loopback connection comes from (Linux /proc): the socket whose local port is the
 * connection's remote port, found among the open sockets of the processes named so far. How the RPC
 * census and bench:watcher tell the service's JSON-RPC calls from the indexer's at a counting proxy
 * (rpc-proxy.ts's `label`).
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/** Socket inodes of a process. */
const socketInodes = (pid: number): Set<string> => {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode !== undefined) inodes.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
};

/** The inode of the TCP socket whose local port is `port`. */
const inodeOfPort = (port: number): string | undefined => {
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"])
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const columns = line.trim().split(/\s+/);
      if (Number.parseInt(columns[1]?.split(":")[1] ?? "", 16) === port) return columns[9];
    }
  return undefined;
};

export interface ProcessLabels {
  /** Names a process (its pid read when a connection is labelled: it may not have started yet). */
  readonly name: (name: string, pid: () => number | undefined) => void;
  /** The named process a connection from `port` belongs to, or "other". */
  readonly label: (port: number) => string;
}

export const processLabels = (): ProcessLabels => {
  const processes = new Map<string, () => number | undefined>();
  const byPort = new Map<number, string>();
  return {
    name: (name, pid) => {
      processes.set(name, pid);
    },
    label: (port) => {
      const known = byPort.get(port);
      if (known !== undefined) return known;
      const inode = inodeOfPort(port);
      for (const [name, pid] of processes) {
        const id = pid();
        if (inode !== undefined && id !== undefined && socketInodes(id).has(inode)) {
          byPort.set(port, name);
          return name;
        }
      }
      return "other";
    },
  };
};
