/**
 * Where webhook deliveries may go. The dispatcher never dials a local or private address in live mode
 * (nor in test mode on a non-local deployment): URLs are checked when an endpoint is written, and again
 * at dial time on the resolved addresses, through a lookup that hands the connection exactly the
 * addresses it checked (DNS rebinding cannot slip a private address in between).
 *
 * Addresses are judged after WHATWG URL parsing, which already turns decimal, octal, hex and short IPv4
 * spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`) into dotted quads and compresses IPv6.
 */
import { lookup } from "node:dns/promises";
import { BlockList, isIP, type LookupFunction } from "node:net";

export type UrlRefusal = {
  readonly code: "url_invalid" | "url_insecure" | "url_private";
  readonly message: string;
};

export const MAX_URL_LENGTH = 2048;

export const parseWebhookUrl = (
  raw: string,
  options: { readonly requireHttps: boolean },
): { ok: true; url: URL } | { ok: false; refusal: UrlRefusal } => {
  const invalid = (message: string) => ({
    ok: false as const,
    refusal: { code: "url_invalid" as const, message },
  });
  if (raw.length > MAX_URL_LENGTH) return invalid(`Webhook URLs are at most ${MAX_URL_LENGTH} characters.`);
  if (!URL.canParse(raw))
    return invalid("Not an absolute URL: give the full https://… address of your receiver.");
  const url = new URL(raw);
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return invalid(`Webhook URLs must use https (or http in test mode), not ${url.protocol.slice(0, 20)}`);
  if (url.username !== "" || url.password !== "")
    return invalid(
      "Webhook URLs must not carry credentials (user:password@): authenticate with the signature.",
    );
  if (raw.includes("#")) return invalid("Webhook URLs must not have a fragment (#…).");
  if (url.hostname === "") return invalid("The webhook URL has no host.");
  if (options.requireHttps && url.protocol === "http:")
    return {
      ok: false,
      refusal: { code: "url_insecure", message: "Live-mode webhook URLs must use https." },
    };
  return { ok: true, url };
};

interface Range {
  readonly name: string;
  readonly cidr: string;
  /** Only for IPv6 input: Node's BlockList matches IPv4 rules against IPv4-mapped IPv6 and back. */
  readonly v6only?: boolean;
}

/** First match wins: specific names (cloud metadata) before the ranges that contain them. */
const RANGES: readonly Range[] = [
  { name: "IPv4-mapped IPv6", cidr: "::ffff:0:0/96", v6only: true },
  { name: "cloud metadata", cidr: "169.254.169.254/32" },
  { name: "cloud metadata", cidr: "100.100.100.200/32" },
  { name: "cloud metadata", cidr: "fd00:ec2::254/128" },
  { name: "unspecified", cidr: "0.0.0.0/8" },
  { name: "private", cidr: "10.0.0.0/8" },
  { name: "CGNAT shared", cidr: "100.64.0.0/10" },
  { name: "loopback", cidr: "127.0.0.0/8" },
  { name: "link-local", cidr: "169.254.0.0/16" },
  { name: "private", cidr: "172.16.0.0/12" },
  { name: "IETF protocol assignments", cidr: "192.0.0.0/24" },
  { name: "documentation", cidr: "192.0.2.0/24" },
  { name: "6to4 relay anycast", cidr: "192.88.99.0/24" },
  { name: "private", cidr: "192.168.0.0/16" },
  { name: "benchmarking", cidr: "198.18.0.0/15" },
  { name: "documentation", cidr: "198.51.100.0/24" },
  { name: "documentation", cidr: "203.0.113.0/24" },
  { name: "multicast", cidr: "224.0.0.0/4" },
  { name: "reserved", cidr: "240.0.0.0/4" },
  { name: "unspecified", cidr: "::/128", v6only: true },
  { name: "loopback", cidr: "::1/128", v6only: true },
  { name: "IPv4-compatible IPv6", cidr: "::/96", v6only: true },
  { name: "NAT64", cidr: "64:ff9b::/96", v6only: true },
  { name: "NAT64 local-use", cidr: "64:ff9b:1::/48", v6only: true },
  { name: "discard-only", cidr: "100::/64", v6only: true },
  { name: "IETF protocol assignments (incl. Teredo)", cidr: "2001::/23", v6only: true },
  { name: "documentation", cidr: "2001:db8::/32", v6only: true },
  { name: "6to4", cidr: "2002::/16", v6only: true },
  { name: "unique-local", cidr: "fc00::/7", v6only: true },
  { name: "link-local", cidr: "fe80::/10", v6only: true },
  { name: "site-local", cidr: "fec0::/10", v6only: true },
  { name: "multicast", cidr: "ff00::/8", v6only: true },
];

const CHECKS = RANGES.map((range) => {
  const [network = "", prefix = "0"] = range.cidr.split("/");
  const list = new BlockList();
  const family = isIP(network) === 6 ? "ipv6" : "ipv4";
  list.addSubnet(network, Number(prefix), family);
  return { range, list };
});

const bare = (ip: string) => ip.replace(/^\[|\]$/g, "").replace(/%.*$/, "");

export const isIpLiteral = (host: string): boolean => isIP(bare(host)) !== 0;

/** The special-purpose range an IP address is in, or undefined for a public unicast address (or no IP). */
export const addressRange = (ip: string): Range | undefined => {
  const address = bare(ip);
  const family = isIP(address);
  if (family === 0) return undefined;
  for (const { range, list } of CHECKS) {
    if (range.v6only && family !== 6) continue;
    if (list.check(address, family === 6 ? "ipv6" : "ipv4")) return range;
  }
  return undefined;
};

const LOCAL_NAMES = /(^|\.)(localhost|local|internal|home\.arpa)$/;

const privateRefusal = (host: string, why: string): UrlRefusal => ({
  code: "url_private",
  message: `Webhook URLs must not point at local or private addresses: ${host.slice(0, 255)} ${why}. The dispatcher does not dial them in live mode.`,
});

/** Names local by definition, and IP literals in a special range. */
export const hostnameRefusal = (hostname: string): UrlRefusal | undefined => {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (isIpLiteral(host)) {
    const range = addressRange(host);
    return range ? privateRefusal(host, `is ${range.name} (${range.cidr})`) : undefined;
  }
  return LOCAL_NAMES.test(host) ? privateRefusal(host, "is a local name") : undefined;
};

export type Resolve = (hostname: string) => Promise<readonly string[]>;

export const systemResolve: Resolve = async (hostname) =>
  (await lookup(hostname, { all: true, order: "verbatim" })).map((entry) => entry.address);

/**
 * The registration check: a literal is judged by its range, a name by itself and then by every address
 * it resolves to (one special address refuses it). A name that does not resolve yet is accepted; the
 * dial-time lookup still protects the connection.
 */
export const checkWebhookHost = async (
  url: URL,
  resolve: Resolve,
): Promise<{ ok: true; addresses: readonly string[] } | { ok: false; refusal: UrlRefusal }> => {
  const refusal = hostnameRefusal(url.hostname);
  if (refusal) return { ok: false, refusal };
  if (isIpLiteral(url.hostname)) return { ok: true, addresses: [bare(url.hostname)] };
  const addresses = await resolve(url.hostname).catch(() => [] as readonly string[]);
  for (const address of addresses) {
    const range = addressRange(address);
    if (range)
      return {
        ok: false,
        refusal: privateRefusal(url.hostname, `resolves to ${address}, ${range.name} (${range.cidr})`),
      };
  }
  return { ok: true, addresses };
};

/** Dial-time check of what the lookup never sees (IP literals) and of local names. */
export const dialRefusal = (url: URL): UrlRefusal | undefined => hostnameRefusal(url.hostname);

class PrivateAddressError extends Error {
  readonly code = "EPRIVATEADDRESS";
}

/**
 * A `net` lookup for undici's connector: resolves, refuses if any address is special, and otherwise
 * answers exactly the addresses it checked, so they are the ones dialled.
 */
export const makeSafeLookup =
  (resolve: Resolve): LookupFunction =>
  (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        for (const address of addresses) {
          const range = addressRange(address);
          if (range) {
            callback(
              new PrivateAddressError(
                `refused to dial ${hostname} at ${address}: ${range.name} (${range.cidr}) addresses are not dialled`,
              ),
              "",
              0,
            );
            return;
          }
        }
        const entries = addresses
          .map((address) => ({ address, family: isIP(address) }))
          .filter((entry) => entry.family !== 0 && (!options.family || entry.family === options.family));
        const [first] = entries;
        if (!first) {
          const error = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
          callback(error, "", 0);
          return;
        }
        if (options.all) (callback as unknown as (e: null, a: typeof entries) => void)(null, entries);
        else callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, "", 0),
    );
  };

export const safeLookup: LookupFunction = makeSafeLookup(systemResolve);
