import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  addressRange,
  checkWebhookHost,
  makeSafeLookup,
  parseWebhookUrl,
  type Resolve,
} from "../../service/webhooks/url-policy.ts";

const neverResolve: Resolve = async (host) => {
  throw new Error(`must not resolve ${host}`);
};
const resolvesTo =
  (...addresses: string[]): Resolve =>
  async () =>
    addresses;

const check = async (raw: string, resolve: Resolve = neverResolve) => {
  const parsed = parseWebhookUrl(raw, { requireHttps: false });
  if (!parsed.ok) return parsed;
  return checkWebhookHost(parsed.url, resolve);
};

/** [URL, the range (or word) its refusal names]: every spelling the issue lists, and then some. */
const REFUSED: ReadonlyArray<readonly [string, string]> = [
  ["http://localhost/h", "local name"],
  ["http://LOCALHOST./h", "local name"],
  ["http://api.localhost/h", "local name"],
  ["http://printer.local/h", "local name"],
  ["http://metadata.google.internal/computeMetadata/v1", "local name"],
  ["http://router.home.arpa/h", "local name"],
  ["http://127.0.0.1/h", "loopback"],
  ["http://127.1/h", "loopback"],
  ["http://2130706433/h", "loopback"],
  ["http://0x7f000001/h", "loopback"],
  ["http://0177.0.0.1/h", "loopback"],
  ["http://0x7f.0.0.1/h", "loopback"],
  ["http://0x7f.1/h", "loopback"],
  ["http://127.255.255.254:8080/h", "loopback"],
  ["http://0.0.0.0/h", "unspecified"],
  ["http://0/h", "unspecified"],
  ["http://10.0.0.1/h", "private"],
  ["http://012.0.0.1/h", "private"],
  ["http://172.16.5.4/h", "private"],
  ["http://172.31.255.255/h", "private"],
  ["http://192.168.0.1/h", "private"],
  ["http://3232235521/h", "private"],
  ["http://100.64.0.1/h", "CGNAT"],
  ["http://100.127.255.254/h", "CGNAT"],
  ["http://169.254.169.254/latest/meta-data/", "cloud metadata"],
  ["http://0xa9fea9fe/", "cloud metadata"],
  ["http://100.100.100.200/", "cloud metadata"],
  ["http://169.254.1.1/h", "link-local"],
  ["http://198.18.0.1/h", "benchmarking"],
  ["http://224.0.0.1/h", "multicast"],
  ["http://255.255.255.255/h", "reserved"],
  ["http://[::1]/h", "loopback"],
  ["http://[0:0:0:0:0:0:0:1]/h", "loopback"],
  ["http://[::]/h", "unspecified"],
  ["http://[::ffff:127.0.0.1]/h", "IPv4-mapped"],
  ["http://[::ffff:7f00:1]/h", "IPv4-mapped"],
  ["http://[::ffff:10.0.0.1]/h", "IPv4-mapped"],
  ["http://[::ffff:8.8.8.8]/h", "IPv4-mapped"],
  ["http://[::127.0.0.1]/h", "IPv4-compatible"],
  ["http://[64:ff9b::7f00:1]/h", "NAT64"],
  ["http://[2002:7f00:1::]/h", "6to4"],
  ["http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/h", "Teredo"],
  ["http://[fd00:ec2::254]/h", "cloud metadata"],
  ["http://[fc00::1]/h", "unique-local"],
  ["http://[fd12:3456:789a::1]/h", "unique-local"],
  ["http://[fe80::1]/h", "link-local"],
  ["http://[ff02::1]/h", "multicast"],
];

describe("webhook URL policy (SSRF)", () => {
  it(`refuses ${REFUSED.length} local and private address forms without resolving literals`, async () => {
    expect(REFUSED.length).toBeGreaterThanOrEqual(25);
    for (const [url, range] of REFUSED) {
      const result = await check(url);
      expect(result.ok, url).toBe(false);
      if (!result.ok) {
        expect(result.refusal.code, url).toBe("url_private");
        expect(result.refusal.message, url).toContain(range);
      }
    }
  });

  it("accepts public addresses and names that resolve only to public addresses", async () => {
    for (const url of [
      "https://8.8.8.8/hook",
      "https://[2606:4700:4700::1111]/x",
      "https://172.32.0.1/x",
      "https://100.128.0.1/x",
      "https://192.169.0.1/x",
      "https://169.255.0.1/x",
    ])
      expect(await check(url), url).toMatchObject({ ok: true });
    expect(
      await check("https://hooks.example.com/x", resolvesTo("93.184.215.14", "2606:2800:21f:cb07::1")),
    ).toEqual({
      ok: true,
      addresses: ["93.184.215.14", "2606:2800:21f:cb07::1"],
    });
  });

  it("refuses a name with any private record, and accepts one that does not resolve yet", async () => {
    for (const addresses of [
      ["10.0.0.5"],
      ["93.184.215.14", "127.0.0.1"],
      ["::ffff:169.254.169.254"],
      ["fd00::1"],
    ]) {
      const result = await check("https://hooks.example.com/x", resolvesTo(...addresses));
      expect(result.ok, addresses.join(",")).toBe(false);
    }
    const unresolvable: Resolve = async () => {
      throw Object.assign(new Error("ENOTFOUND"), { code: "ENOTFOUND" });
    };
    expect(await check("https://not-yet.example.com/x", unresolvable)).toEqual({ ok: true, addresses: [] });
  });

  it("refuses what is not an absolute http(s) URL, credentials, fragments, over-long URLs, and http when https is required", () => {
    for (const raw of [
      "ftp://example.com/x",
      "javascript:alert(1)",
      "/relative",
      "example.com/x",
      "https://u:p@example.com/",
      "https://example.com/#f",
      `https://example.com/${"a".repeat(2048)}`,
    ])
      expect(parseWebhookUrl(raw, { requireHttps: false }), raw).toMatchObject({
        ok: false,
        refusal: { code: "url_invalid" },
      });
    expect(parseWebhookUrl("http://example.com/x", { requireHttps: true })).toMatchObject({
      ok: false,
      refusal: { code: "url_insecure" },
    });
    expect(parseWebhookUrl("http://example.com/x", { requireHttps: false })).toMatchObject({ ok: true });
  });

  it("refuses at dial time what a name resolves to then (DNS rebinding), and dials exactly what it checked", async () => {
    let calls = 0;
    const rebinding: Resolve = async () => (calls++ === 0 ? ["93.184.215.14"] : ["127.0.0.1"]);
    const lookup = makeSafeLookup(rebinding);
    const ask = (options: { all?: boolean; family?: number }) =>
      new Promise<{ error: NodeJS.ErrnoException | null; address: unknown; family?: number }>((resolve) =>
        lookup("hooks.example.com", options, (error, address, family) => resolve({ error, address, family })),
      );
    expect(await ask({})).toEqual({ error: null, address: "93.184.215.14", family: 4 });
    const second = await ask({});
    expect(second.error?.code).toBe("EPRIVATEADDRESS");
    expect(second.error?.message).toContain("127.0.0.1");

    const both = makeSafeLookup(resolvesTo("93.184.215.14", "2606:2800:21f:cb07::1"));
    const all = await new Promise<unknown>((resolve) =>
      both("h", { all: true }, (_e, addresses) => resolve(addresses)),
    );
    expect(all).toEqual([
      { address: "93.184.215.14", family: 4 },
      { address: "2606:2800:21f:cb07::1", family: 6 },
    ]);
    const v6 = await new Promise<unknown>((resolve) =>
      both("h", { family: 6 }, (_e, address) => resolve(address)),
    );
    expect(v6).toBe("2606:2800:21f:cb07::1");
  });

  it("refuses every address inside each private IPv4 range, and every IPv4-mapped form", () => {
    const octet = fc.integer({ min: 0, max: 255 });
    fc.assert(
      fc.property(octet, octet, octet, fc.constantFrom(10, 127), (b, c, d, a) => {
        expect(addressRange(`${a}.${b}.${c}.${d}`)).toBeDefined();
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 16, max: 31 }), octet, octet, (b, c, d) => {
        expect(addressRange(`172.${b}.${c}.${d}`)?.name).toBe("private");
      }),
    );
    fc.assert(
      fc.property(fc.ipV4(), (ip) => {
        expect(addressRange(`::ffff:${ip}`)).toBeDefined();
      }),
    );
  });
});
