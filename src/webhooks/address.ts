import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

/**
 * The address rules of the spec ("The address must use https:// and be public.
 * All IP addresses of the name are checked and the request goes to the checked
 * address"). Checked at PUT /webhook and again at every attempt; the sender
 * connects to the address returned here, so a name that resolves differently
 * later (DNS rebinding) cannot reach an internal address.
 */

/** Every address of a host name (A and AAAA). Injected in tests. */
export type Resolver = (host: string) => Promise<string[]>;

export const systemResolver: Resolver = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

export const MAX_URL_LENGTH = 2048;

/** Why an address was refused; the message is safe to show to the partner. */
export class AddressRejected extends Error {}

export interface AddressPolicy {
  /** WEBHOOK_ALLOW_HOSTS: exempt from the https and public-address rules (development and tests only). */
  allowHosts: readonly string[];
  resolve: Resolver;
}

export interface CheckedTarget {
  url: URL;
  /** host name without brackets or trailing dot, lower case; an IP for literal addresses */
  host: string;
  /** true when the host is an IP literal (no SNI then) */
  literal: boolean;
  addresses: string[];
  /** the checked address the request must go to */
  pinned: string;
}

/**
 * The one rule for addresses: only plain global unicast. ipaddr.js names every
 * special-purpose range (loopback, private, link-local, CGNAT, unspecified,
 * multicast, broadcast, documentation and benchmarking ("reserved",
 * "benchmarking"), unique-local, IPv4-mapped, NAT64 ("rfc6052", "rfc6145"),
 * 6to4, Teredo, ...) and answers "unicast" for everything else. IPv6 must also
 * lie in 2000::/3, which leaves out IPv4-compatible ::a.b.c.d and other
 * unassigned space.
 */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

export function addressProblem(address: string): string | null {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(address);
  } catch {
    return `${address} is not an IP address`;
  }
  const range = addr.range();
  if (range !== 'unicast') return `${addr.toString()} is not a public address (${range})`;
  if (addr.kind() === 'ipv6' && !(addr as ipaddr.IPv6).match(GLOBAL_UNICAST_V6 as [ipaddr.IPv6, number])) {
    return `${addr.toString()} is not a public address (outside global unicast)`;
  }
  return null;
}

/** Host of a URL as compared and resolved: no IPv6 brackets, no trailing dot, lower case. */
function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '').toLowerCase();
}

function normaliseAllowed(entry: string): string {
  const e = entry.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  return ipaddr.isValid(e) ? ipaddr.parse(e).toString() : e;
}

/**
 * The rules that need no DNS: https, length, no credentials, a host, and for
 * literal IPs the public-address rule. The WHATWG URL parser already turns
 * every IPv4 notation (`2130706433`, `0x7f.1`, `127.1`) into dotted decimal and
 * compresses IPv6, so a literal is checked in one canonical form.
 */
export function parseWebhookUrl(raw: string, allowHosts: readonly string[]): { url: URL; host: string; literal: boolean; allowed: boolean } {
  if (raw.length > MAX_URL_LENGTH) throw new AddressRejected(`the address is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AddressRejected('the address is not a valid absolute URL');
  }
  const host = bareHost(url);
  if (!host) throw new AddressRejected('the address has no host');
  const literal = ipaddr.isValid(host) && (url.hostname.startsWith('[') || ipaddr.IPv4.isValidFourPartDecimal(host));
  const key = literal ? ipaddr.parse(host).toString() : host;
  const allowed = allowHosts.map(normaliseAllowed).includes(key);
  if (url.protocol !== 'https:' && !(allowed && url.protocol === 'http:')) throw new AddressRejected('the address must use https://');
  if (url.username || url.password) throw new AddressRejected('the address must not contain credentials');
  if (allowed) return { url, host: key, literal, allowed };
  if (!literal && (host === 'localhost' || host.endsWith('.localhost'))) throw new AddressRejected('localhost is not a public address');
  if (literal) {
    const problem = addressProblem(host);
    if (problem) throw new AddressRejected(problem);
  }
  return { url, host: key, literal, allowed };
}

/**
 * Every rule: parses, resolves the host (A and AAAA), requires every address to
 * be public, and returns the address to connect to (the first one, in the
 * resolver's order).
 */
export async function checkWebhookUrl(raw: string, policy: AddressPolicy): Promise<CheckedTarget> {
  const { url, host, literal, allowed } = parseWebhookUrl(raw, policy.allowHosts);
  let addresses: string[];
  if (literal) {
    addresses = [host];
  } else {
    try {
      addresses = await policy.resolve(host);
    } catch (err) {
      const code = (err as { code?: string }).code;
      throw new AddressRejected(`the host name does not resolve${code ? ` (${code})` : ''}`);
    }
    if (addresses.length === 0) throw new AddressRejected('the host name does not resolve');
  }
  // (a literal was checked by parseWebhookUrl.) The message names the rule,
  // never the resolved address nor its range: it would tell anyone with an API
  // key what an internal name resolves to (an oracle for mapping the network),
  // at PUT /webhook and in the attempts list.
  if (!allowed && !literal && addresses.some((a) => addressProblem(a) !== null)) {
    throw new AddressRejected('the host name resolves to an address that is not public');
  }
  // An IPv4-mapped answer is refused above; for allowed hosts connect to the IPv4 form.
  const first = ipaddr.process(addresses[0]).toString();
  return { url, host, literal, addresses, pinned: first };
}
