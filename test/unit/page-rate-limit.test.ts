import fc from "fast-check";
import ipaddr from "ipaddr.js";
import { describe, expect, it } from "vitest";
import { clientAddress, pageRequestKeys, tokenOfPath } from "../../service/http/page-rate-limit.ts";
import { clientKey } from "../../service/limits/client-key.ts";

/** An IPv6 address from its eight 16-bit parts, written in one of the forms a client or proxy may use. */
const written = (parts: ReadonlyArray<number>, form: "full" | "compact" | "upper"): string => {
  const address = new ipaddr.IPv6([...parts]);
  if (form === "full") return address.toNormalizedString();
  const compact = address.toRFC5952String();
  return form === "upper" ? compact.toUpperCase() : compact;
};

const part = fc.integer({ min: 0, max: 0xffff });
const prefix = fc.tuple(part, part, part, part);
const interfaceId = fc.tuple(part, part, part, part);
const form = fc.constantFrom("full" as const, "compact" as const, "upper" as const);
const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = fc.tuple(octet, octet, octet, octet);
/** IPv4-mapped addresses (::ffff:0:0/96) are IPv4 clients: the /64s below exclude ::/64, where they live. */
const notMappedPrefix = prefix.filter(([a, b, c, d]) => a + b + c + d > 0);

describe("client keys of the rate limits", () => {
  it("maps every address of one IPv6 /64 to one key, however it is written", () => {
    fc.assert(
      fc.property(notMappedPrefix, interfaceId, interfaceId, form, form, (net, one, two, f1, f2) => {
        expect(clientKey(written([...net, ...one], f1))).toBe(clientKey(written([...net, ...two], f2)));
      }),
    );
  });

  it("gives distinct /64s distinct keys, even when their interface parts agree", () => {
    fc.assert(
      fc.property(notMappedPrefix, notMappedPrefix, interfaceId, (a, b, host) => {
        fc.pre(a.some((value, i) => value !== b[i]));
        expect(clientKey(written([...a, ...host], "compact"))).not.toBe(
          clientKey(written([...b, ...host], "compact")),
        );
      }),
    );
  });

  it("keys IPv4 by the whole address, and an IPv4-mapped IPv6 address as that IPv4 address", () => {
    fc.assert(
      fc.property(ipv4, ([a, b, c, d]) => {
        const v4 = `${a}.${b}.${c}.${d}`;
        const mapped = ipaddr.IPv4.parse(v4).toIPv4MappedAddress();
        expect(clientKey(`::ffff:${v4}`)).toBe(clientKey(v4));
        expect(clientKey(mapped.toNormalizedString())).toBe(clientKey(v4));
        expect(clientKey(mapped.toRFC5952String())).toBe(clientKey(v4));
        expect(clientKey(v4)).toBe(`v4:${v4}`);
      }),
    );
  });

  it("gives distinct IPv4 addresses distinct keys, and never an IPv6 client's", () => {
    fc.assert(
      fc.property(ipv4, ipv4, notMappedPrefix, interfaceId, (a, b, net, host) => {
        fc.pre(a.some((value, i) => value !== b[i]));
        expect(clientKey(a.join("."))).not.toBe(clientKey(b.join(".")));
        expect(clientKey(a.join("."))).not.toBe(clientKey(written([...net, ...host], "compact")));
      }),
    );
  });

  it("names the /64 in the key, and keeps what is not an address apart", () => {
    expect(clientKey("2001:db8:1:2:3:4:5:6")).toBe("v6:2001:db8:1:2::/64");
    expect(clientKey("fe80::1%eth0")).toBe("v6:fe80::/64");
    expect(clientKey("unknown")).toBe("other:unknown");
    // A port a proxy appended is not part of the client.
    expect(clientKey("203.0.113.9:51234")).toBe("v4:203.0.113.9");
    expect(clientKey("[2001:db8:1:2::9]:443")).toBe("v6:2001:db8:1:2::/64");
    expect(clientKey("[::ffff:203.0.113.9]")).toBe("v4:203.0.113.9");
    expect(clientKey("x".repeat(100))).toBe(`other:${"x".repeat(64)}`);
  });
});

describe("page rate limit keys", () => {
  it("uses the socket address unless a proxy is trusted", () => {
    expect(clientAddress("10.0.0.1", "1.2.3.4", false)).toBe("10.0.0.1");
    expect(clientAddress("10.0.0.1", "6.6.6.6, 1.2.3.4", true)).toBe("1.2.3.4");
    expect(clientAddress("10.0.0.1", undefined, true)).toBe("10.0.0.1");
    expect(clientAddress(undefined, undefined, false)).toBe("unknown");
  });

  it("counts a request per client and names the page token it would count once known", () => {
    const token = "abcdefghijklmnopqrstuvwxyz012345";
    expect(tokenOfPath(`/authorize/${token}/signatures`)).toEqual({ page: "authorize", token });
    expect(tokenOfPath(`/pay/${token}`)).toEqual({ page: "pay", token });
    expect(tokenOfPath("/assets/authorize.js")).toBeUndefined();
    expect(tokenOfPath(`/portal/${token}/subscriptions/sub_x/cancel`)).toEqual({ page: "portal", token });
    expect(tokenOfPath("/portal/short")).toBeUndefined();
    expect(tokenOfPath(`/other/${token}`)).toBeUndefined();
    const limits = { perAddressPerMinute: 10, perTokenPerMinute: 5, trustProxy: false };
    expect(
      pageRequestKeys(limits, { path: `/authorize/${token}/session`, socketAddress: "2001:db8::7" }),
    ).toEqual({
      client: { key: "page:client:v6:2001:db8::/64", limit: 10 },
      token: { page: "authorize", token, key: `page:token:${token}`, limit: 5 },
    });
    expect(pageRequestKeys(limits, { path: "/assets/pay.js", socketAddress: "::ffff:127.0.0.1" })).toEqual({
      client: { key: "page:client:v4:127.0.0.1", limit: 10 },
      token: undefined,
    });
  });
});
