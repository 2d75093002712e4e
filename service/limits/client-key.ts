/**
 * What a per-client limit counts against: an IPv4 address, or an IPv6 address's /64. One subscriber or
 * host is routinely given a whole /64 (SLAAC, privacy addresses), so counting single IPv6 addresses
 * would give one client 2^64 budgets. An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, what a dual-stack
 * socket reports for an IPv4 peer) is that IPv4 address.
 */
import ipaddr from "ipaddr.js";

const IPV6_PREFIX_PARTS = 4; // 4 × 16 bits: the /64

/**
 * The address without a port some proxies append (`1.2.3.4:5678`, `[2001:db8::1]:5678`): a port per
 * connection must not make a key per connection.
 */
const withoutPort = (address: string): string =>
  /^\[([^\]]+)\](?::\d+)?$/.exec(address)?.[1] ?? /^([\d.]+):\d+$/.exec(address)?.[1] ?? address;

/**
 * The key of a client address: `v4:<address>`, `v6:<prefix>/64`, or, for what is not an address
 * (a trusted proxy's odd entry, no socket), `other:` and its first 64 characters.
 */
export const clientKey = (written: string): string => {
  const address = withoutPort(written);
  if (!ipaddr.isValid(address)) return `other:${written.slice(0, 64)}`;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === "ipv4") return `v4:${parsed.toString()}`;
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, IPV6_PREFIX_PARTS);
  return `v6:${new ipaddr.IPv6([...parts, 0, 0, 0, 0]).toRFC5952String()}/64`;
};
