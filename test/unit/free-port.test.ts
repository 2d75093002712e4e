/**
 * `freePort` picks ports the kernel does not hand out on its own: a port from the ephemeral range can
 * be taken by any outgoing connection between the check and its user's bind. Nor one that fetch refuses
 * to dial (the Fetch standard's bad ports, up to 10080). Nor, for a while, one it has handed out
 * already, to this process or another: a stack binds its ports long after choosing them.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { freePort } from "../../scripts/stack/wait.ts";

const ephemeralStart = Number.parseInt(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"), 10);

describe("freePort", () => {
  it("returns ports between fetch's bad ports and the kernel's ephemeral range that can be listened on", async () => {
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      expect(port).toBeGreaterThan(10_080);
      expect(port).toBeLessThan(ephemeralStart);
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", resolve);
      });
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("does not hand out a port twice while it is claimed, even before anyone binds it", async () => {
    // 600 draws from ~22,000 ports repeat one with a probability above 0.999 without the claims.
    const ports: number[] = [];
    for (let i = 0; i < 600; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });

  it("stays above 10080, a port fetch refuses to dial", async () => {
    const refused = await fetch("http://127.0.0.1:10080/").then(
      () => undefined,
      (error: unknown) => String((error as { cause?: { message?: string } }).cause?.message),
    );
    expect(refused).toBe("bad port");
  });
});
