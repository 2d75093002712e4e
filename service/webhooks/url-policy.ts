/**
 * Where webhook deliveries may go (SSRF policy). The dispatcher never dials a local or private address in
 * live mode (nor in test mode on a non-local deployment), or a merchant could make it fetch our cloud
 * metadata, databases or admin ports. URLs are checked when an endpoint is written, and again at dial
 * time on the resolved addresses, through a lookup that hands the connection exactly the addresses it
 * checked, so DNS rebinding cannot slip a private address in between.
 *
 * Test mode on a local deployment (the local stack, or `WEBHOOK_TEST_ALLOW_PRIVATE_URLS` said explicitly)
 * additionally allows loopback and private ranges (and `localhost` names), through the same checks:
 * cloud metadata, link-local, multicast, reserved and every other special range stay refused in every
 * mode, at registration and at every dial.
 *
 * Hosts are judged after WHATWG URL parsing, which already turns decimal, octal, hex and short IPv4
 * spellings (`2130706433`, `0x7f000001`, `0177.0.0.1`, `0x7f.1`, `127.1`) into dotted quads and IPv6 into
 * compressed bracketed form (`[::ffff:127.0.0.1]` becomes `[::ffff:7f00:1]`).
 */
import { lookup } from "node:dns/promises";
import { BlockList, isIP, type LookupFunction } from "node:net";

export type UrlRefusal = {
  readonly code: "url_invalid" | "url_insecure" | "url_private";
  readonly message: string;
};

export const MAX_URL_LENGTH = 2048;

const invalid = (message: string) => ({
  ok: false as const,
  refusal: { code: "url_invalid" as const, message },
});

export const parseWebhookUrl = (
  raw: string,
  options: { readonly requireHttps: boolean },
): { ok: true; url: URL } | { ok: false; refusal: UrlRefusal } => {
  if (raw.length > MAX_URL_LENGTH) return invalid(`Webhook URLs are at most ${MAX_URL_LENGTH} characters.`);
  if (!URL.canParse(raw))
    return invalid("Not an absolute URL: give the full https://… address of your receiver.");
  // The URL parser would silently drop them; refuse instead, so the stored URL is the one given.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this looks for
  if (/[\s\u0000-\u001f\u007f]/.test(raw))
    return invalid("Webhook URLs must not contain spaces or control characters.");
  const url = new URL(raw);
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return invalid(`Webhook URLs must use https (or http in test mode), not ${url.protocol.slice(0, 20)}.`);
  if (url.username !== "" || url.password !== "")
    return invalid(
      "Webhook URLs must not carry credentials (user:password@): authenticate with the signature.",
    );
  if (raw.includes("#")) return invalid("Webhook URLs must not have a fragment (#…).");
  if (url.hostname === "") return invalid("The webhook URL has no host.");
  if (url.href.length > MAX_URL_LENGTH)
    return invalid(`Webhook URLs are at most ${MAX_URL_LENGTH} characters (once normalised).`);
  if (options.requireHttps && url.protocol === "http:")
    return {
      ok: false,
      refusal: { code: "url_insecure", message: "Live-mode webhook URLs must use https." },
    };
  return { ok: true, url };
};

export type AddressRange = { readonly name: string; readonly cidr: string };

/**
 * Special-purpose ranges (IANA registries), each read as "<address> is <name> (<cidr>)". First match
 * wins: the specific names (cloud metadata, broadcast, Teredo) come before the ranges that contain them.
 */
const RANGES: readonly AddressRange[] = [
  { name: "cloud metadata", cidr: "169.254.169.254/32" },
  { name: "cloud metadata", cidr: "100.100.100.200/32" },
  { name: "unspecified (this network)", cidr: "0.0.0.0/8" },
  { name: "private", cidr: "10.0.0.0/8" },
  { name: "CGNAT shared address space", cidr: "100.64.0.0/10" },
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
  { name: "broadcast", cidr: "255.255.255.255/32" },
  { name: "reserved", cidr: "240.0.0.0/4" },
  { name: "unspecified", cidr: "::/128" },
  { name: "loopback", cidr: "::1/128" },
  { name: "IPv4-mapped IPv6", cidr: "::ffff:0:0/96" },
  { name: "IPv4-compatible IPv6", cidr: "::/96" },
  { name: "NAT64", cidr: "64:ff9b::/96" },
  { name: "NAT64 local-use", cidr: "64:ff9b:1::/48" },
  { name: "discard-only", cidr: "100::/64" },
  { name: "Teredo", cidr: "2001::/32" },
  { name: "IETF protocol assignments", cidr: "2001::/23" },
  { name: "documentation", cidr: "2001:db8::/32" },
  { name: "6to4", cidr: "2002::/16" },
  { name: "documentation", cidr: "3fff::/20" },
  { name: "SRv6 SIDs", cidr: "5f00::/16" },
  { name: "cloud metadata", cidr: "fd00:ec2::254/128" },
  { name: "unique-local", cidr: "fc00::/7" },
  { name: "link-local", cidr: "fe80::/10" },
  { name: "site-local", cidr: "fec0::/10" },
  { name: "multicast", cidr: "ff00::/8" },
];

/**
 * One BlockList per range, so that a match names its range. A rule is only checked against an address
 * of its own family: BlockList matches IPv4 rules against IPv4-mapped IPv6 input (`::ffff:7f00:1` is in
 * 127.0.0.0/8) and the IPv6 rule `::ffff:0:0/96` against every plain IPv4 input. It answers false,
 * without an error, for input that is not an IP of the family asked: hence `isIP` first.
 */
const CHECKS = RANGES.map((range) => {
  const [network = "", prefix = ""] = range.cidr.split("/");
  const family = isIP(network) === 6 ? "ipv6" : "ipv4";
  const list = new BlockList();
  list.addSubnet(network, Number(prefix), family);
  return { range, family, list };
});

/** The ranges test mode may dial when private URLs are allowed there (named as in RANGES). */
const ALLOWED_IN_TEST: ReadonlySet<string> = new Set(["loopback", "private", "unique-local"]);

/** Whether loopback and private ranges are allowed too (test mode on a local deployment). */
export type AddressScope = { readonly allowPrivate: boolean };

export const PUBLIC_ONLY: AddressScope = { allowPrivate: false };
export const PRIVATE_ALLOWED: AddressScope = { allowPrivate: true };

/** `[fe80::1%eth0]` → `fe80::1`: no brackets, no zone id (as messages show it). */
const bare = (ip: string) => ip.replace(/^\[|\]$/g, "").replace(/%.*$/, "");

/** An IPv4 or IPv6 literal (brackets and an IPv6 zone id allowed). */
export const isIpLiteral = (host: string): boolean => isIP(bare(host)) !== 0;

/**
 * The special-purpose range an IP literal is in; undefined for a public unicast address. Only meaningful
 * for IP literals: anything else is also undefined, so test `isIpLiteral` first.
 */
export const addressRange = (ip: string): AddressRange | undefined => {
  const address = bare(ip);
  const family = isIP(address) === 4 ? "ipv4" : isIP(address) === 6 ? "ipv6" : undefined;
  if (!family) return undefined;
  const found = CHECKS.find((check) => check.family === family && check.list.check(address, family));
  return found && { name: found.range.name, cidr: found.range.cidr };
};

/** The special range of `address` that `scope` refuses; undefined for a public or allowed address. */
export const refusedRange = (address: string, scope: AddressScope): AddressRange | undefined => {
  const range = addressRange(address);
  return range && !(scope.allowPrivate && ALLOWED_IN_TEST.has(range.name)) ? range : undefined;
};

const privateRefusal = (why: string, scope: AddressScope): UrlRefusal => ({
  code: "url_private",
  message: scope.allowPrivate
    ? `Webhook URLs must not point at cloud metadata, link-local or other special addresses (test mode allows public, loopback and private ones): ${why.slice(0, 400)}.`
    : `Webhook URLs must not point at local, private or loopback addresses: ${why.slice(0, 400)}.`,
});

const LOCAL_SUFFIXES = ["localhost", "local", "internal", "home.arpa"];
/** Local names test mode may use: loopback names only (`*.internal` is where clouds put metadata). */
const LOCAL_SUFFIXES_ALLOWED_IN_TEST: ReadonlySet<string> = new Set(["localhost"]);
/** Cloud metadata services' names outside `*.internal` (GCP, AWS, Alibaba), refused in every mode. */
const METADATA_NAMES = ["metadata", "metadata.goog", "instance-data", "metadata.tencentyun.com"];

/**
 * IP literals in a refused range; names local by definition (`localhost`, `*.localhost`, `*.local`,
 * `*.internal`, `*.home.arpa`: in test mode with private addresses allowed, only `localhost` names);
 * cloud metadata names in every mode.
 */
export const hostnameRefusal = (
  hostname: string,
  scope: AddressScope = PUBLIC_ONLY,
): UrlRefusal | undefined => {
  const host = hostname.toLowerCase().replace(/\.+$/, "");
  if (isIpLiteral(host)) {
    const range = refusedRange(host, scope);
    return range && privateRefusal(`${bare(host)} is ${range.name} (${range.cidr})`, scope);
  }
  if (METADATA_NAMES.includes(host)) return privateRefusal(`${host} is a cloud metadata name`, scope);
  const suffix = LOCAL_SUFFIXES.find((name) => host === name || host.endsWith(`.${name}`));
  if (suffix === undefined || (scope.allowPrivate && LOCAL_SUFFIXES_ALLOWED_IN_TEST.has(suffix)))
    return undefined;
  return privateRefusal(`${host} is a local name (${host === suffix ? suffix : `*.${suffix}`})`, scope);
};

export type Resolve = (hostname: string) => Promise<readonly string[]>;

export const systemResolve: Resolve = async (hostname) =>
  (await lookup(hostname, { all: true, order: "verbatim" })).map((entry) => entry.address);

/** The first resolved address in a range `scope` refuses, with its range. */
const firstRefused = (addresses: readonly string[], scope: AddressScope) => {
  for (const address of addresses) {
    const range = refusedRange(address, scope);
    if (range) return { address, range };
  }
  return undefined;
};

/**
 * The registration check: a literal is judged by its range, a name by itself and then by every address
 * it resolves to (one special address refuses it). A name that does not resolve (yet) is accepted with
 * no addresses; the dial-time lookup still protects the connection. Never throws.
 */
export const checkWebhookHost = async (
  url: URL,
  resolve: Resolve,
  scope: AddressScope = PUBLIC_ONLY,
): Promise<{ ok: true; addresses: readonly string[] } | { ok: false; refusal: UrlRefusal }> => {
  const refusal = hostnameRefusal(url.hostname, scope);
  if (refusal) return { ok: false, refusal };
  if (isIpLiteral(url.hostname)) return { ok: true, addresses: [bare(url.hostname)] };
  let addresses: readonly string[];
  try {
    addresses = await resolve(url.hostname);
  } catch {
    return { ok: true, addresses: [] };
  }
  const special = firstRefused(addresses, scope);
  if (!special) return { ok: true, addresses };
  const { address, range } = special;
  return {
    ok: false,
    refusal: privateRefusal(
      `${url.hostname} resolves to ${address}, which is ${range.name} (${range.cidr})`,
      scope,
    ),
  };
};

/**
 * The dial-time check of what the lookup never sees: `net.connect` does not call `lookup` for an IP
 * literal host. Also refuses local names before any resolution.
 */
export const dialRefusal = (url: URL, scope: AddressScope = PUBLIC_ONLY): UrlRefusal | undefined =>
  hostnameRefusal(url.hostname, scope);

class PrivateAddressError extends Error {
  override readonly name = "PrivateAddressError";
  readonly code = "EPRIVATEADDRESS";
}

const familyNumber = (family: number | "IPv4" | "IPv6" | undefined): number =>
  family === "IPv4" ? 4 : family === "IPv6" ? 6 : (family ?? 0);

/**
 * A `net` lookup for undici's connector (`new Agent({ connect: { lookup } })`): resolves, fails with code
 * EPRIVATEADDRESS if any address is special, and otherwise answers exactly the addresses it checked
 * (all of them with `options.all`, else the first; filtered by `options.family`), so they are the ones
 * dialled.
 */
export const makeSafeLookup =
  (resolve: Resolve, scope: AddressScope = PUBLIC_ONLY): LookupFunction =>
  (hostname, options, callback) => {
    const family = familyNumber(options.family);
    Promise.resolve()
      .then(() => resolve(hostname))
      .then(
        (addresses) => {
          const special = firstRefused(addresses, scope);
          if (special) {
            const { address, range } = special;
            const message = `Refused to dial ${hostname}: it resolves to ${address}, which is ${range.name} (${range.cidr}); webhooks are not delivered to ${scope.allowPrivate ? "cloud metadata, link-local or other special addresses" : "local, private or loopback addresses"}.`;
            callback(new PrivateAddressError(message), "", 0);
            return;
          }
          const entries = addresses
            .map((address) => ({ address, family: isIP(address) }))
            .filter((entry) => entry.family !== 0 && (family === 0 || entry.family === family));
          const [first] = entries;
          if (!first) {
            const error = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), {
              code: "ENOTFOUND",
              hostname,
            });
            callback(error, "", 0);
          } else if (options.all) callback(null, entries);
          else callback(null, first.address, first.family);
        },
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error)), "", 0),
      );
  };

export const safeLookup: LookupFunction = makeSafeLookup(systemResolve);
/** Test mode's lookup where private URLs are allowed: loopback and private addresses pass too. */
export const testModeLookup: LookupFunction = makeSafeLookup(systemResolve, PRIVATE_ALLOWED);
