/**
 * `freePort` picks ports the kernel does not hand out on its own: a port from the ephemeral range can
 * be taken by any outgoing connection between the check and its user's bind.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { freePort } from "../../scripts/stack/wait.ts";

const ephemeralStart = Number.parseInt(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"), 10);

describe("freePort", () => {
  it("returns ports below the kernel's ephemeral range that can be listened on", async () => {
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(ephemeralStart);
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", resolve);
      });
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
