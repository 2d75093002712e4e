import type { LookupAddress, LookupOptions } from "node:dns";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { Agent, request } from "undici";
import { describe, expect, it } from "vitest";
import { makeAttemptSender, PRIVATE_RESPONSE_BODY_LIMIT } from "../../service/webhooks/sender.ts";
import {
  addressRange,
  checkWebhookHost,
  dialRefusal,
  hostnameRefusal,
  isIpLiteral,
  makeSafeLookup,
  PRIVATE_ALLOWED,
  parseWebhookUrl,
  type Resolve,
  refusedRange,
} from "../../service/webhooks/url-policy.ts";

/** A resolver that records its calls: literals and local names must never reach it. */
const recording = (answer: Resolve = async () => []) => {
  const calls: string[] = [];
  const resolve: Resolve = (host) => {
    calls.push(host);
    return answer(host);
  };
  return { calls, resolve };
};
const resolvesTo =
  (...addresses: string[]): Resolve =>
  async () =>
    addresses;

const check = async (raw: string, resolve: Resolve, scope = { allowPrivate: false }) => {
  const parsed = parseWebhookUrl(raw, { requireHttps: false });
  if (!parsed.ok) return parsed;
  return checkWebhookHost(parsed.url, resolve, scope);
};

/** [URL, what its refusal names]: every spelling of the spec, and then some. */
const REFUSED: ReadonlyArray<readonly [string, string]> = [
  ["http://localhost/h", "localhost is a local name"],
  ["http://LOCALHOST./h", "localhost is a local name"],
  ["http://localhost../h", "localhost is a local name"],
  ["http://foo.localhost/h", "*.localhost"],
  ["http://printer.local/h", "*.local"],
  ["http://metadata.google.internal/computeMetadata/v1", "*.internal"],
  ["http://router.home.arpa/h", "*.home.arpa"],
  ["http://127.0.0.1/h", "127.0.0.1 is loopback (127.0.0.0/8)"],
  ["http://127.1/h", "127.0.0.1 is loopback"],
  ["http://2130706433/h", "127.0.0.1 is loopback"],
  ["http://0x7f000001/h", "127.0.0.1 is loopback"],
  ["http://0177.0.0.1/h", "127.0.0.1 is loopback"],
  ["http://0x7f.0.0.1/h", "127.0.0.1 is loopback"],
  ["http://0x7f.1/h", "127.0.0.1 is loopback"],
  ["http://0x7F.00.0.01/h", "127.0.0.1 is loopback"],
  ["http://127.0.0.1./h", "127.0.0.1 is loopback"],
  ["http://%31%32%37.0.0.1/h", "127.0.0.1 is loopback"],
  ["http://127.255.255.254:8080/h", "loopback"],
  ["http://0.0.0.0/h", "unspecified (this network) (0.0.0.0/8)"],
  ["http://0/h", "0.0.0.0 is unspecified"],
  ["http://10.0.0.1/h", "private (10.0.0.0/8)"],
  ["http://012.0.0.1/h", "10.0.0.1 is private"],
  ["http://172.16.5.4/h", "private (172.16.0.0/12)"],
  ["http://172.31.255.255/h", "private (172.16.0.0/12)"],
  ["http://192.168.0.1/h", "private (192.168.0.0/16)"],
  ["http://3232235521/h", "192.168.0.1 is private"],
  ["http://100.64.0.1/h", "CGNAT"],
  ["http://100.127.255.254/h", "CGNAT"],
  ["http://169.254.169.254/latest/meta-data/", "169.254.169.254 is cloud metadata (169.254.169.254/32)"],
  ["http://0xa9fea9fe/", "169.254.169.254 is cloud metadata"],
  ["http://100.100.100.200/", "cloud metadata (100.100.100.200/32)"],
  ["http://169.254.1.1/h", "link-local (169.254.0.0/16)"],
  ["http://192.0.0.8/h", "IETF protocol assignments"],
  ["http://192.0.2.1/h", "documentation"],
  ["http://192.88.99.1/h", "6to4 relay anycast"],
  ["http://198.18.0.1/h", "benchmarking (198.18.0.0/15)"],
  ["http://198.51.100.7/h", "documentation"],
  ["http://203.0.113.7/h", "documentation"],
  ["http://224.0.0.1/h", "multicast (224.0.0.0/4)"],
  ["http://240.0.0.1/h", "reserved (240.0.0.0/4)"],
  ["http://255.255.255.255/h", "broadcast"],
  ["http://[::1]/h", "::1 is loopback (::1/128)"],
  ["http://[0:0:0:0:0:0:0:1]/h", "::1 is loopback"],
  ["http://[::]/h", ":: is unspecified (::/128)"],
  ["http://[::ffff:127.0.0.1]/h", "::ffff:7f00:1 is IPv4-mapped IPv6 (::ffff:0:0/96)"],
  ["http://[::ffff:7f00:1]/h", "IPv4-mapped IPv6"],
  ["http://[::ffff:10.0.0.1]/h", "IPv4-mapped IPv6"],
  ["http://[::ffff:169.254.169.254]/h", "IPv4-mapped IPv6"],
  ["http://[::ffff:8.8.8.8]/h", "IPv4-mapped IPv6"],
  ["http://[::127.0.0.1]/h", "IPv4-compatible IPv6 (::/96)"],
  ["http://[64:ff9b::7f00:1]/h", "NAT64 (64:ff9b::/96)"],
  ["http://[64:ff9b:1::1]/h", "NAT64 local-use"],
  ["http://[100::1]/h", "discard-only"],
  ["http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/h", "Teredo (2001::/32)"],
  ["http://[2001:db8::1]/h", "documentation (2001:db8::/32)"],
  ["http://[2002:7f00:1::]/h", "6to4 (2002::/16)"],
  ["http://[fd00:ec2::254]/h", "cloud metadata (fd00:ec2::254/128)"],
  ["http://[fc00::1]/h", "unique-local (fc00::/7)"],
  ["http://[fd12:3456:789a::1]/h", "unique-local"],
  ["http://[fe80::1]/h", "link-local (fe80::/10)"],
  ["http://[fec0::1]/h", "site-local"],
  ["http://[ff02::1]/h", "multicast (ff00::/8)"],
];

describe("webhook URL policy: the SSRF table", () => {
  it("has at least 30 rows", () => expect(REFUSED.length).toBeGreaterThanOrEqual(30));

  it.each(REFUSED)("refuses %s (%s) without resolving it", async (url, names) => {
    const { calls, resolve } = recording();
    const result = await check(url, resolve);
    expect(calls).toEqual([]);
    expect(result).toMatchObject({ ok: false, refusal: { code: "url_private" } });
    if (!result.ok) {
      expect(result.refusal.message).toContain(names);
      expect(result.refusal.message).toMatch(
        /^Webhook URLs must not point at local, private or loopback addresses: .+\.$/,
      );
    }
    // The dial-time check refuses the same URL before any connection.
    expect(dialRefusal(new URL(url))?.code).toBe("url_private");
  });

  it("reads the spec's example message word for word", async () => {
    expect(await check("http://127.0.0.1/", recording().resolve)).toEqual({
      ok: false,
      refusal: {
        code: "url_private",
        message:
          "Webhook URLs must not point at local, private or loopback addresses: 127.0.0.1 is loopback (127.0.0.0/8).",
      },
    });
  });

  it("relies on WHATWG URL to normalise IPv4 spellings to dotted quads and IPv6 to compressed form", () => {
    const normalised: ReadonlyArray<readonly [string, string]> = [
      ["http://2130706433/", "127.0.0.1"],
      ["http://0x7f000001/", "127.0.0.1"],
      ["http://0177.0.0.1/", "127.0.0.1"],
      ["http://0x7f.1/", "127.0.0.1"],
      ["http://127.1/", "127.0.0.1"],
      ["http://0/", "0.0.0.0"],
      ["http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]"],
      ["http://[0:0:0:0:0:0:0:1]/", "[::1]"],
      ["http://[64:ff9b::127.0.0.1]/", "[64:ff9b::7f00:1]"],
      ["http://LOCALHOST./", "localhost."],
    ];
    for (const [raw, hostname] of normalised) expect(new URL(raw).hostname, raw).toBe(hostname);
    // Out-of-range IPv4 and zone ids are not URLs at all.
    for (const raw of ["http://256.0.0.1/", "http://1.2.3.4.5/", "http://[fe80::1%25eth0]/"])
      expect(parseWebhookUrl(raw, { requireHttps: false }), raw).toMatchObject({
        ok: false,
        refusal: { code: "url_invalid" },
      });
  });
});

describe("webhook URL policy: what is accepted", () => {
  it.each([
    "https://8.8.8.8/hook",
    "https://[2606:4700:4700::1111]/x",
    "https://172.32.0.1/x",
    "https://172.15.255.255/x",
    "https://100.128.0.1/x",
    "https://100.63.255.255/x",
    "https://192.169.0.1/x",
    "https://169.255.0.1/x",
    "https://11.0.0.1/x",
    "https://[2a00:1450:4001:82a::200e]/x",
  ])("accepts the public literal %s without resolving it", async (url) => {
    const { calls, resolve } = recording();
    const result = await check(url, resolve);
    expect(calls).toEqual([]);
    expect(result).toEqual({ ok: true, addresses: [new URL(url).hostname.replace(/^\[|\]$/g, "")] });
    expect(dialRefusal(new URL(url))).toBeUndefined();
  });

  it("accepts a name that resolves only to public addresses, and names that merely look local", async () => {
    const { calls, resolve } = recording(resolvesTo("93.184.215.14", "2606:2800:21f:cb07::1"));
    expect(await check("https://hooks.example.com/x", resolve)).toEqual({
      ok: true,
      addresses: ["93.184.215.14", "2606:2800:21f:cb07::1"],
    });
    expect(calls).toEqual(["hooks.example.com"]);
    for (const name of [
      "localhost.example.com",
      "mylocal",
      "notlocalhost.com",
      "internal.example.com",
      "arpa",
    ])
      expect(hostnameRefusal(name), name).toBeUndefined();
  });
});

describe("webhook URL policy: names and what they resolve to", () => {
  it.each([
    [["10.0.0.5"], "resolves to 10.0.0.5, which is private (10.0.0.0/8)"],
    [["93.184.215.14", "127.0.0.1"], "resolves to 127.0.0.1, which is loopback"],
    [["::ffff:169.254.169.254"], "resolves to ::ffff:169.254.169.254, which is IPv4-mapped IPv6"],
    [["2606:2800:21f:cb07::1", "fd00::1"], "resolves to fd00::1, which is unique-local"],
    [["169.254.169.254"], "resolves to 169.254.169.254, which is cloud metadata (169.254.169.254/32)"],
  ])("refuses a name resolving to %j", async (addresses, message) => {
    const result = await check("https://hooks.example.com/x", resolvesTo(...addresses));
    expect(result).toMatchObject({ ok: false, refusal: { code: "url_private" } });
    if (!result.ok) expect(result.refusal.message).toContain(`hooks.example.com ${message}`);
  });

  it("accepts a name that does not resolve yet (the dial-time check still protects), and never throws", async () => {
    const notFound: Resolve = async () => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
    };
    expect(await check("https://not-yet.example.com/x", notFound)).toEqual({ ok: true, addresses: [] });
    const throwsAtOnce: Resolve = () => {
      throw new Error("broken resolver");
    };
    expect(await check("https://not-yet.example.com/x", throwsAtOnce)).toEqual({ ok: true, addresses: [] });
  });
});

describe("webhook URL policy: parsing", () => {
  it.each([
    ["ftp://example.com/x", "not ftp:"],
    ["javascript:alert(1)", "not javascript:"],
    ["file:///etc/passwd", "not file:"],
    ["/relative", "Not an absolute URL"],
    ["example.com/x", "Not an absolute URL"],
    ["", "Not an absolute URL"],
    ["https://u:p@example.com/", "credentials"],
    ["https://u@example.com/", "credentials"],
    ["https://example.com/#f", "fragment"],
    ["https://example.com/#", "fragment"],
    [`https://example.com/${"a".repeat(2048)}`, "at most 2048 characters"],
    ["not a url", "Not an absolute URL"],
    ["https://example.com/a b", "spaces or control characters"],
    ["https://exa\tmple.com/", "spaces or control characters"],
    ["https://example.com/\nx", "spaces or control characters"],
    [" https://example.com/", "spaces or control characters"],
  ])("refuses %j as url_invalid (%s)", (raw, message) => {
    const result = parseWebhookUrl(raw, { requireHttps: false });
    expect(result).toMatchObject({ ok: false, refusal: { code: "url_invalid" } });
    if (!result.ok) expect(result.refusal.message).toContain(message);
  });

  it("takes URLs up to 2048 characters, and http only when https is not required", () => {
    const longest = `https://example.com/${"a".repeat(2048 - "https://example.com/".length)}`;
    expect(longest).toHaveLength(2048);
    expect(parseWebhookUrl(longest, { requireHttps: true })).toMatchObject({ ok: true });
    expect(parseWebhookUrl("http://example.com/x", { requireHttps: true })).toEqual({
      ok: false,
      refusal: { code: "url_insecure", message: "Live-mode webhook URLs must use https." },
    });
    const parsed = parseWebhookUrl("http://example.com:8080/x?y=1", { requireHttps: false });
    expect(parsed.ok && parsed.url.href).toBe("http://example.com:8080/x?y=1");
  });
});

describe("webhook URL policy: address ranges", () => {
  it("takes brackets and zone ids, and says nothing of what is not an IP", () => {
    expect(addressRange("[::1]")).toEqual({ name: "loopback", cidr: "::1/128" });
    expect(addressRange("fe80::1%eth0")).toEqual({ name: "link-local", cidr: "fe80::/10" });
    expect(addressRange("[fe80::1%25eth0]")).toEqual({ name: "link-local", cidr: "fe80::/10" });
    expect(addressRange("8.8.8.8")).toBeUndefined();
    expect(isIpLiteral("[fe80::1%eth0]")).toBe(true);
    expect(isIpLiteral("127.0.0.1")).toBe(true);
    for (const notIp of ["localhost", "example.com", "127.1", "", "1.2.3.256"]) {
      expect(isIpLiteral(notIp), notIp).toBe(false);
      expect(addressRange(notIp), notIp).toBeUndefined();
    }
  });
});

describe("webhook URL policy: the dial-time lookup", () => {
  type Answer = { error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number };
  const ask = (lookup: ReturnType<typeof makeSafeLookup>, options: LookupOptions) =>
    new Promise<Answer>((resolve) =>
      lookup("hooks.example.com", options, (error, address, family) => resolve({ error, address, family })),
    );

  it("refuses what a name resolves to at dial time (DNS rebinding)", async () => {
    let calls = 0;
    const rebinding: Resolve = async () => (calls++ === 0 ? ["93.184.215.14"] : ["127.0.0.1"]);
    const lookup = makeSafeLookup(rebinding);
    expect(await ask(lookup, {})).toEqual({ error: null, address: "93.184.215.14", family: 4 });
    const second = await ask(lookup, {});
    expect(second.error?.code).toBe("EPRIVATEADDRESS");
    expect(second.error?.message).toBe(
      "Refused to dial hooks.example.com: it resolves to 127.0.0.1, which is loopback (127.0.0.0/8); webhooks are not delivered to local, private or loopback addresses.",
    );
  });

  it("refuses when any address is special, even one of a family not asked for", async () => {
    const mixed = makeSafeLookup(resolvesTo("93.184.215.14", "::1"));
    for (const options of [{}, { all: true }, { family: 4 }, { family: 4, all: true }])
      expect((await ask(mixed, options)).error?.code, JSON.stringify(options)).toBe("EPRIVATEADDRESS");
  });

  it("answers all addresses with options.all, filters by options.family, else the first", async () => {
    const both = makeSafeLookup(resolvesTo("2606:2800:21f:cb07::1", "93.184.215.14", "93.184.215.15"));
    expect(await ask(both, { all: true })).toEqual({
      error: null,
      address: [
        { address: "2606:2800:21f:cb07::1", family: 6 },
        { address: "93.184.215.14", family: 4 },
        { address: "93.184.215.15", family: 4 },
      ],
      family: undefined,
    });
    expect(await ask(both, { all: true, family: 4 })).toMatchObject({
      address: [
        { address: "93.184.215.14", family: 4 },
        { address: "93.184.215.15", family: 4 },
      ],
    });
    expect(await ask(both, {})).toEqual({ error: null, address: "2606:2800:21f:cb07::1", family: 6 });
    expect(await ask(both, { family: 4 })).toEqual({ error: null, address: "93.184.215.14", family: 4 });
    expect(await ask(both, { family: "IPv4" })).toEqual({ error: null, address: "93.184.215.14", family: 4 });
    expect(await ask(both, { family: 6 })).toEqual({
      error: null,
      address: "2606:2800:21f:cb07::1",
      family: 6,
    });
    const onlyV4 = makeSafeLookup(resolvesTo("93.184.215.14"));
    expect((await ask(onlyV4, { family: 6 })).error?.code).toBe("ENOTFOUND");
  });

  it("passes a resolver's failure on as the lookup error", async () => {
    const failing = makeSafeLookup(async () => {
      throw Object.assign(new Error("getaddrinfo EAI_AGAIN hooks.example.com"), { code: "EAI_AGAIN" });
    });
    expect((await ask(failing, {})).error?.code).toBe("EAI_AGAIN");
    const throwsAtOnce = makeSafeLookup(() => {
      throw new Error("broken resolver");
    });
    expect((await ask(throwsAtOnce, {})).error?.message).toBe("broken resolver");
  });

  it("is what undici dials through: a name resolving to loopback never reaches the local receiver", async () => {
    let received = 0;
    const server = createServer((_request, response) => {
      received++;
      response.end("ok");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const agent = new Agent({ connect: { lookup: makeSafeLookup(resolvesTo("127.0.0.1")) } });
    try {
      await expect(
        request(`http://receiver.example:${port}/`, { method: "POST", dispatcher: agent }),
      ).rejects.toMatchObject({ code: "EPRIVATEADDRESS" });
      expect(received).toBe(0);
    } finally {
      await agent.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

/** The brief's ranges (and the two newer IANA entries the module adds), checked with BigInt arithmetic. */
const SPECIAL_CIDRS = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
  "::/128",
  "::1/128",
  "::ffff:0:0/96",
  "::/96",
  "64:ff9b::/96",
  "64:ff9b:1::/48",
  "100::/64",
  "2001::/23",
  "2001:db8::/32",
  "2002::/16",
  "3fff::/20",
  "5f00::/16",
  "fc00::/7",
  "fe80::/10",
  "fec0::/10",
  "ff00::/8",
];

const v4ToBig = (ip: string) => ip.split(".").reduce((n, octet) => (n << 8n) | BigInt(octet), 0n);
const bigToV4 = (n: bigint) => [24n, 16n, 8n, 0n].map((shift) => String((n >> shift) & 0xffn)).join(".");
const v6ToBig = (ip: string) => {
  const [head = "", tail] = ip.split("::");
  const groups = (part: string | undefined) => (part ? part.split(":") : []);
  const padding = Array.from({ length: 8 - groups(head).length - groups(tail).length }, () => "0");
  const all = tail === undefined ? groups(head) : [...groups(head), ...padding, ...groups(tail)];
  return all.reduce((n, group) => (n << 16n) | BigInt(`0x${group}`), 0n);
};
const bigToV6 = (n: bigint) =>
  Array.from({ length: 8 }, (_, i) => ((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(":");

const cidrs = SPECIAL_CIDRS.map((cidr) => {
  const [network = "", prefix = ""] = cidr.split("/");
  const v6 = network.includes(":");
  const bits = v6 ? 128n : 32n;
  const hostMask = (1n << (bits - BigInt(prefix))) - 1n;
  const base = v6 ? v6ToBig(network) : v4ToBig(network);
  return { cidr, v6, base, hostMask, format: v6 ? bigToV6 : bigToV4 };
});
const inSpecialRange = (v6: boolean, n: bigint) =>
  cidrs.some((range) => range.v6 === v6 && (n & ~range.hostMask) === range.base);

describe("webhook URL policy: properties", () => {
  it("refuses every address inside each listed range", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...cidrs),
        fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        (range, random) => {
          const address = range.format(range.base | (random & range.hostMask));
          expect(addressRange(address), `${address} in ${range.cidr}`).toBeDefined();
          expect(hostnameRefusal(range.v6 ? `[${address}]` : address)?.code).toBe("url_private");
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("accepts every address outside them", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), (v6, random) => {
        const n = v6 ? random : random & 0xffffffffn;
        fc.pre(!inSpecialRange(v6, n));
        const address = v6 ? bigToV6(n) : bigToV4(n);
        expect(addressRange(address), address).toBeUndefined();
      }),
      { numRuns: 2000 },
    );
  });

  it("refuses every IPv4-mapped IPv6 address, in either spelling, through the URL parser", () => {
    fc.assert(
      fc.property(fc.ipV4(), (ip) => {
        const n = v4ToBig(ip);
        const hex = `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
        for (const raw of [
          `http://[::ffff:${ip}]/`,
          `http://[::ffff:${hex}]/`,
          `http://[0:0:0:0:0:ffff:${ip}]/`,
        ]) {
          const parsed = parseWebhookUrl(raw, { requireHttps: false });
          expect(parsed.ok && dialRefusal(parsed.url)?.message).toContain("IPv4-mapped IPv6 (::ffff:0:0/96)");
        }
        expect(addressRange(`::ffff:${ip}`)?.name).toBe("IPv4-mapped IPv6");
      }),
    );
  });

  it("judges decimal, hex and octal spellings of any IPv4 address as its dotted quad", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (n) => {
        const dotted = bigToV4(BigInt(n));
        for (const spelling of [String(n), `0x${n.toString(16)}`, `0${n.toString(8)}`]) {
          const parsed = parseWebhookUrl(`http://${spelling}/`, { requireHttps: false });
          expect(parsed.ok && parsed.url.hostname, spelling).toBe(dotted);
          expect(parsed.ok && dialRefusal(parsed.url)).toEqual(hostnameRefusal(dotted));
        }
      }),
    );
  });
});

/** [URL, what its refusal names]: refused in test mode too, where loopback and private ones are allowed. */
const REFUSED_IN_TEST: ReadonlyArray<readonly [string, string]> = [
  ["http://169.254.169.254/latest/meta-data/", "169.254.169.254 is cloud metadata (169.254.169.254/32)"],
  ["http://0xa9fea9fe/", "169.254.169.254 is cloud metadata"],
  ["http://2852039166/", "169.254.169.254 is cloud metadata"],
  ["http://100.100.100.200/", "cloud metadata (100.100.100.200/32)"],
  ["http://[fd00:ec2::254]/", "cloud metadata (fd00:ec2::254/128)"],
  ["http://169.254.1.1/h", "link-local (169.254.0.0/16)"],
  ["http://[fe80::1]/h", "link-local (fe80::/10)"],
  ["http://[febf::1]/h", "link-local (fe80::/10)"],
  [
    "http://metadata.google.internal/computeMetadata/v1",
    "metadata.google.internal is a local name (*.internal)",
  ],
  ["http://instance-data.ec2.internal/", "*.internal"],
  ["http://metadata/computeMetadata/v1", "metadata is a cloud metadata name"],
  ["http://metadata.goog/", "metadata.goog is a cloud metadata name"],
  ["http://0.0.0.0/h", "unspecified (this network) (0.0.0.0/8)"],
  ["http://0.1.2.3/h", "unspecified (this network)"],
  ["http://[::]/h", "unspecified (::/128)"],
  ["http://224.0.0.1/h", "multicast (224.0.0.0/4)"],
  ["http://[ff02::1]/h", "multicast (ff00::/8)"],
  ["http://240.0.0.1/h", "reserved (240.0.0.0/4)"],
  ["http://255.255.255.255/h", "broadcast"],
  ["http://100.64.0.1/h", "CGNAT"],
  ["http://192.0.2.1/h", "documentation"],
  ["http://198.18.0.1/h", "benchmarking"],
  ["http://[::ffff:127.0.0.1]/h", "IPv4-mapped IPv6"],
  ["http://[::ffff:169.254.169.254]/h", "IPv4-mapped IPv6"],
  ["http://[64:ff9b::a9fe:a9fe]/h", "NAT64"],
  ["http://[fec0::1]/h", "site-local"],
];

describe("webhook URL policy: test mode with private URLs allowed", () => {
  it.each(REFUSED_IN_TEST)(
    "refuses %s (%s) at registration and dial, without resolving it",
    async (url, names) => {
      const { calls, resolve } = recording();
      const result = await check(url, resolve, PRIVATE_ALLOWED);
      expect(calls).toEqual([]);
      expect(result).toMatchObject({ ok: false, refusal: { code: "url_private" } });
      if (!result.ok) {
        expect(result.refusal.message).toContain(names);
        expect(result.refusal.message).toMatch(
          /^Webhook URLs must not point at cloud metadata, link-local or other special addresses \(test mode allows public, loopback and private ones\): .+\.$/,
        );
      }
      expect(dialRefusal(new URL(url), PRIVATE_ALLOWED)?.code).toBe("url_private");
    },
  );

  it.each([
    "http://127.0.0.1:3000/h",
    "http://127.1/h",
    "http://[::1]:3000/h",
    "http://10.1.2.3/h",
    "http://172.16.0.1/h",
    "http://192.168.1.10/h",
    "http://[fd12:3456::1]/h",
    "https://8.8.8.8/h",
  ])("accepts the literal %s", async (url) => {
    const { calls, resolve } = recording();
    expect(await check(url, resolve, PRIVATE_ALLOWED)).toMatchObject({ ok: true });
    expect(calls).toEqual([]);
    expect(dialRefusal(new URL(url), PRIVATE_ALLOWED)).toBeUndefined();
    // The same URL stays refused where private addresses are not allowed (live mode).
    if (!url.includes("8.8.8.8")) expect(dialRefusal(new URL(url))?.code).toBe("url_private");
  });

  it("accepts localhost names (resolved like any name), and refuses other local names", async () => {
    const { calls, resolve } = recording(resolvesTo("127.0.0.1", "::1"));
    expect(await check("http://localhost:3000/h", resolve, PRIVATE_ALLOWED)).toEqual({
      ok: true,
      addresses: ["127.0.0.1", "::1"],
    });
    expect(await check("http://api.localhost/h", resolve, PRIVATE_ALLOWED)).toMatchObject({ ok: true });
    expect(calls).toEqual(["localhost", "api.localhost"]);
    for (const host of ["printer.local", "router.home.arpa", "db.internal"])
      expect(hostnameRefusal(host, PRIVATE_ALLOWED)?.code, host).toBe("url_private");
  });

  it("refuses a name whose DNS answer is cloud metadata or link-local, at registration and at every dial", async () => {
    for (const address of ["169.254.169.254", "169.254.3.4", "fe80::1", "fd00:ec2::254", "224.0.0.5"]) {
      const result = await check("http://rebind.example/h", resolvesTo(address), PRIVATE_ALLOWED);
      expect(result, address).toMatchObject({ ok: false, refusal: { code: "url_private" } });
    }
    let calls = 0;
    const rebinding: Resolve = async () => (calls++ === 0 ? ["10.0.0.7"] : ["169.254.169.254"]);
    const lookup = makeSafeLookup(rebinding, PRIVATE_ALLOWED);
    const ask = () =>
      new Promise<NodeJS.ErrnoException | null>((resolve) =>
        lookup("rebind.example", {}, (error) => resolve(error)),
      );
    expect(await ask()).toBeNull();
    const second = await ask();
    expect(second?.code).toBe("EPRIVATEADDRESS");
    expect(second?.message).toBe(
      "Refused to dial rebind.example: it resolves to 169.254.169.254, which is cloud metadata (169.254.169.254/32); webhooks are not delivered to cloud metadata, link-local or other special addresses.",
    );
  });

  it("refuses at lookup, before any connection, a name resolving to metadata; dials one resolving to loopback", async () => {
    let received = 0;
    const server = createServer((_request, response) => {
      received++;
      response.end("ok");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    // 127.0.0.1 stands in for the metadata service: the lookup answers 169.254.169.254, so a connection
    // would go nowhere; what matters is that the dial is refused at lookup, with no connection attempted.
    const metadata = new Agent({
      connect: { lookup: makeSafeLookup(resolvesTo("169.254.169.254"), PRIVATE_ALLOWED) },
    });
    const loopback = new Agent({
      connect: { lookup: makeSafeLookup(resolvesTo("127.0.0.1"), PRIVATE_ALLOWED) },
    });
    try {
      await expect(
        request(`http://metadata.example:${port}/`, { method: "POST", dispatcher: metadata }),
      ).rejects.toMatchObject({ code: "EPRIVATEADDRESS" });
      expect(received).toBe(0);
      const answer = await request(`http://receiver.example:${port}/`, {
        method: "POST",
        dispatcher: loopback,
      });
      expect(await answer.body.text()).toBe("ok");
      expect(received).toBe(1);
    } finally {
      await Promise.all([metadata.close(), loopback.close()]);
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("refuses what the sender is asked to dial in test mode, and keeps only an excerpt of a private answer", async () => {
    let received = 0;
    const server = createServer((_request, response) => {
      received++;
      response.statusCode = 500;
      response.end("x".repeat(5000));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const sender = makeAttemptSender({ timeoutMs: 5000, connectionsPerOrigin: 1 });
    const attempt = (url: string) =>
      sender.send({ url, body: "{}", headers: { "content-type": "application/json" }, allowPrivate: true });
    try {
      for (const url of [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://100.100.100.200/",
      ]) {
        const outcome = await attempt(url);
        expect(outcome, url).toMatchObject({
          ok: false,
          statusCode: null,
          durationMs: 0,
          responseBody: null,
        });
        expect(outcome.error, url).toContain("must not point at cloud metadata, link-local or other special");
      }
      const local = await attempt(`http://127.0.0.1:${port}/h`);
      expect(local).toMatchObject({ ok: false, statusCode: 500 });
      expect(local.responseBody).toHaveLength(PRIVATE_RESPONSE_BODY_LIMIT);
      expect(received).toBe(1);
    } finally {
      await sender.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("refuses every address of the ranges test mode does not allow, and allows the others", () => {
    const allowed = new Set([
      "127.0.0.0/8",
      "::1/128",
      "10.0.0.0/8",
      "172.16.0.0/12",
      "192.168.0.0/16",
      "fc00::/7",
    ]);
    fc.assert(
      fc.property(
        fc.constantFrom(...cidrs),
        fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        (range, random) => {
          const n = range.base | (random & range.hostMask);
          const address = range.format(n);
          const refused = refusedRange(address, PRIVATE_ALLOWED);
          // An allowed range nested in a refused one wins (::1 lies inside ::/96).
          const alsoAllowed = cidrs.some(
            (other) =>
              allowed.has(other.cidr) && other.v6 === range.v6 && (n & ~other.hostMask) === other.base,
          );
          if (!allowed.has(range.cidr) && !alsoAllowed)
            expect(refused, `${address} in ${range.cidr}`).toBeDefined();
          else if (address !== "fd00:ec2:0:0:0:0:0:254") expect(refused, address).toBeUndefined();
        },
      ),
      { numRuns: 2000 },
    );
    expect(refusedRange("169.254.169.254", PRIVATE_ALLOWED)?.name).toBe("cloud metadata");
    expect(refusedRange("fd00:ec2::254", PRIVATE_ALLOWED)?.name).toBe("cloud metadata");
  });
});
