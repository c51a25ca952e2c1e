// Where a webhook may go. A webhook URL is chosen by whoever submits the job, and the service POSTs to it from
// inside the operator's network: left unchecked, a tenant's webhook reaches the service's own routes, the host's
// loopback listeners and the private network, and the delivery log (status, time) turns that into a scanner.
// So every outbound webhook is checked here:
//
// - at submit, from the URL alone: an http(s) scheme, and an IP literal outside the refused ranges (the URL parser
//   has already normalised `2130706433`, `0x7f.1`, `017700000001`, `127.1` and `[::ffff:127.0.0.1]`);
// - at connect time, through the socket's `lookup`: every address a host name resolves to is checked and only a
//   checked address is connected to, so a name that resolves to 127.0.0.1 (or is rebound to it after the submit)
//   fails the delivery, naming the rule.
//
// Refused by default: loopback, private (RFC 1918 and the 100.64/10 shared space), link-local, unique-local,
// unspecified, multicast, broadcast and other special-purpose ranges, IPv6 forms carrying such an IPv4 address,
// this host's own addresses, and the service's own listener. The operator's allow-list (CIDRs, addresses, host
// names) admits internal receivers; nothing admits the service's own listener. docs/security.md, "Webhooks".

import { lookup as systemLookup } from "node:dns/promises";
import type { LookupAddress, LookupOptions } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { networkInterfaces } from "node:os";
import { Refusal, UsageError } from "../../errors.js";

/** The ranges refused by the address's class. */
export type AddressRule = "loopback" | "private" | "link-local" | "unique-local" | "unspecified" | "multicast" | "broadcast" | "reserved";
/** Every rule a webhook URL can be refused by. */
export type WebhookRule = AddressRule | "scheme" | "this-host" | "service";

const WHAT: Record<WebhookRule, string> = {
  scheme: "not an http(s) URL",
  loopback: "a loopback address",
  private: "a private address",
  "link-local": "a link-local address",
  "unique-local": "a unique-local address",
  unspecified: "the unspecified address",
  multicast: "a multicast address",
  broadcast: "the broadcast address",
  reserved: "a special-purpose (reserved) address",
  "this-host": "an address of the service's own host",
  service: "the service's own address",
};

/** A webhook URL the rules refuse: which rule, and a sentence naming it. */
export interface WebhookRefusal {
  rule: WebhookRule;
  message: string;
}

/** A delivery refused by the rules (thrown from the socket's lookup, or before any connection). */
export class WebhookRefused extends Refusal {
  readonly rule: WebhookRule;
  constructor(refusal: WebhookRefusal) {
    super("forbidden", refusal.message);
    this.rule = refusal.rule;
  }
}

/** Resolves a host name to every address it has (the system resolver by default; tests inject a fake). */
export type WebhookLookup = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: WebhookLookup = (hostname) => systemLookup(hostname, { all: true, verbatim: true });

// ---- addresses as bytes -------------------------------------------------------------------------------------------

/** The 4 bytes of a dotted-decimal IPv4 address (as the URL parser and resolvers write them), else undefined. Pure. */
function ipv4Bytes(text: string): number[] | undefined {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.map(Number);
}

/** The 16 bytes of an IPv6 address (brackets and a zone allowed), else undefined. Pure. */
function ipv6Bytes(text: string): number[] | undefined {
  let s = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  s = s.split("%")[0]!;
  if (isIP(s) !== 6) return undefined;
  // A dotted IPv4 tail (::ffff:127.0.0.1) as its two hex groups.
  const lastColon = s.lastIndexOf(":");
  const v4 = ipv4Bytes(s.slice(lastColon + 1));
  if (v4) s = `${s.slice(0, lastColon + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  const words = (part: string) => (part === "" ? [] : part.split(":").map((w) => parseInt(w, 16)));
  const [head, rest] = s.split("::") as [string, string | undefined];
  const front = words(head);
  const back = rest === undefined ? [] : words(rest);
  const groups = rest === undefined ? front : [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
  if (groups.length !== 8) return undefined;
  return groups.flatMap((g) => [g >> 8, g & 0xff]);
}

/** An address as IPv4 bytes when it is one or an IPv6 form carrying one (mapped, compatible, translated), else IPv6 bytes. Pure. */
function effectiveBytes(address: string): number[] | undefined {
  const v4 = ipv4Bytes(address);
  if (v4) return v4;
  const v6 = ipv6Bytes(address);
  if (!v6) return undefined;
  return carriedIpv4(v6) ?? v6;
}

const zero = (bytes: number[], from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);

/** The IPv4 address an IPv6 one stands for on this host's own stack: mapped, compatible, translated. Pure. */
function carriedIpv4(b: number[]): number[] | undefined {
  if (!zero(b, 0, 8)) return undefined;
  const last = b.slice(12);
  // ::ffff:a.b.c.d (mapped)
  if (b[8] === 0 && b[9] === 0 && b[10] === 0xff && b[11] === 0xff) return last;
  // ::ffff:0:a.b.c.d (translated)
  if (b[8] === 0xff && b[9] === 0xff && b[10] === 0 && b[11] === 0) return last;
  // ::a.b.c.d (compatible; :: and ::1 are IPv6's own)
  if (zero(b, 8, 12) && !zero(b, 12, 15)) return last;
  return undefined;
}

function classifyIpv4([a, b, c, d]: number[]): AddressRule | undefined {
  if (a === 0) return "unspecified"; // 0.0.0.0/8, "this network"
  if (a === 127) return "loopback";
  if (a === 10 || (a === 172 && b! >= 16 && b! < 32) || (a === 192 && b === 168)) return "private";
  if (a === 100 && b! >= 64 && b! < 128) return "private"; // shared address space (carrier-grade NAT)
  if (a === 169 && b === 254) return "link-local";
  if (a === 255 && b === 255 && c === 255 && d === 255) return "broadcast";
  if (a! >= 224 && a! < 240) return "multicast";
  if (a! >= 240) return "reserved";
  // IETF protocol assignments, documentation, benchmarking, the old 6to4 relay
  if (a === 192 && b === 0 && (c === 0 || c === 2)) return "reserved";
  if (a === 192 && b === 88 && c === 99) return "reserved";
  if (a === 198 && (b === 18 || b === 19)) return "reserved";
  if ((a === 198 && b === 51 && c === 100) || (a === 203 && b === 0 && c === 113)) return "reserved";
  return undefined;
}

function classifyIpv6(b: number[]): AddressRule | undefined {
  if (zero(b, 0, 16)) return "unspecified";
  if (zero(b, 0, 15) && b[15] === 1) return "loopback";
  const carried = carriedIpv4(b);
  if (carried) return classifyIpv4(carried) ?? undefined;
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway forwards to
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(b, 4, 12)) return classifyIpv4(b.slice(12));
  if (b[0] === 0x20 && b[1] === 0x02) return classifyIpv4(b.slice(2, 6));
  if (b[0] === 0xff) return "multicast";
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return "link-local";
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0xc0) return "private"; // site-local, deprecated
  if ((b[0]! & 0xfe) === 0xfc) return "unique-local";
  if (zero(b, 0, 1)) return "reserved"; // the rest of ::/8
  if (b[0] === 0x01 && zero(b, 1, 8)) return "reserved"; // discard-only 100::/64
  if (b[0] === 0x20 && b[1] === 0x01 && ((b[2] === 0x0d && b[3] === 0xb8) || zero(b, 2, 4))) return "reserved"; // documentation, Teredo
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) return "reserved"; // local-use NAT64
  return undefined;
}

/**
 * The rule an IP address (IPv4 dotted-decimal, or IPv6 with or without brackets) is refused by, or undefined for a
 * public address. Text that is not an IP address is undefined too: names are checked once resolved. Pure.
 */
export function classifyAddress(address: string): AddressRule | undefined {
  const v4 = ipv4Bytes(address);
  if (v4) return classifyIpv4(v4);
  const v6 = ipv6Bytes(address);
  return v6 ? classifyIpv6(v6) : undefined;
}

/** Whether `text` is an IP literal (IPv6 possibly in brackets). Pure. */
function isIpLiteral(text: string): boolean {
  return ipv4Bytes(text) !== undefined || ipv6Bytes(text) !== undefined;
}

/** One spelling per address (IPv4 carried in IPv6 as the IPv4), to compare addresses. Pure. */
function addressKey(address: string): string | undefined {
  const bytes = effectiveBytes(address);
  return bytes?.join(".");
}

// ---- the operator's allow-list ------------------------------------------------------------------------------------

interface Cidr {
  bytes: number[];
  bits: number;
}

/** What the operator admits: address ranges, and host names (exact, or `*.domain` for the names under it). */
export interface WebhookAllowList {
  cidrs: Cidr[];
  names: string[];
  domains: string[];
}

const HOST_NAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** The allow-list of `entries` (CIDRs, addresses, host names, `*.domain`), and a sentence for each entry that is none. Pure. */
export function parseWebhookAllow(entries: readonly string[]): { allow: WebhookAllowList; problems: string[] } {
  const allow: WebhookAllowList = { cidrs: [], names: [], domains: [] };
  const problems: string[] = [];
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase().replace(/\.$/, "");
    if (entry === "") continue;
    const slash = entry.indexOf("/");
    const address = slash < 0 ? entry : entry.slice(0, slash);
    const bytes = isIpLiteral(address) ? effectiveBytes(address) : undefined;
    if (bytes) {
      const max = bytes.length * 8;
      // An IPv4 range written in IPv6 (::ffff:10.0.0.0/104) is that IPv4 range.
      const v4InV6 = bytes.length === 4 && !ipv4Bytes(address);
      const bits = slash < 0 ? max : Number(entry.slice(slash + 1)) - (v4InV6 ? 96 : 0);
      if (!/^\d{1,3}$/.test(slash < 0 ? "0" : entry.slice(slash + 1)) || !Number.isInteger(bits) || bits < 0 || bits > max)
        problems.push(`"${raw}" has no valid prefix length (0-${max})`);
      else allow.cidrs.push({ bytes, bits });
    } else if (slash >= 0) problems.push(`"${raw}" is not an address range (like 10.0.0.0/8 or fd00::/8)`);
    else if (entry.startsWith("*.") && HOST_NAME.test(entry.slice(2))) allow.domains.push(entry.slice(2));
    else if (HOST_NAME.test(entry)) allow.names.push(entry);
    else problems.push(`"${raw}" is not an address, an address range or a host name`);
  }
  return { allow, problems };
}

function inCidr(bytes: number[], cidr: Cidr): boolean {
  if (bytes.length !== cidr.bytes.length) return false;
  for (let bit = 0; bit < cidr.bits; bit++) {
    const mask = 0x80 >> (bit % 8);
    if ((bytes[bit >> 3]! & mask) !== (cidr.bytes[bit >> 3]! & mask)) return false;
  }
  return true;
}

/** Whether the allow-list admits `address`. Pure. */
export function allowsAddress(allow: WebhookAllowList, address: string): boolean {
  const bytes = effectiveBytes(address);
  return bytes !== undefined && allow.cidrs.some((c) => inCidr(bytes, c));
}

/** Whether the allow-list admits the host name `name` (whatever it resolves to). Pure. */
export function allowsName(allow: WebhookAllowList, name: string): boolean {
  const n = name.toLowerCase().replace(/\.$/, "");
  return allow.names.includes(n) || allow.domains.some((d) => n.endsWith(`.${d}`));
}

/** The loopback ranges, which `svc dev` and `svc deploy --preview` admit: one user, on their own machine. */
export const LOOPBACK_WEBHOOK_ALLOW: readonly string[] = ["127.0.0.0/8", "::1/128"];

// ---- the policy ---------------------------------------------------------------------------------------------------

/** Where the service itself listens, and the URLs it is known by. */
export interface ServiceListener {
  host: string;
  port: number;
  urls: string[];
}

export interface WebhookAddressOptions {
  /** The operator's allow-list: CIDRs, addresses, host names, `*.domain` (none: only public addresses). */
  allow?: readonly string[];
  /** Resolves host names at connect time (default: the system resolver). */
  lookup?: WebhookLookup;
  /** Where the service listens, once it does: never a webhook's destination, whatever the allow-list says. */
  self?: () => ServiceListener | undefined;
  /** This host's own addresses (default: its network interfaces'). */
  hostAddresses?: () => string[];
}

const WILDCARDS = new Set(["0.0.0.0", "::", "[::]"]);
const defaultPort = (url: URL) => Number(url.port || (url.protocol === "https:" ? 443 : 80));

function interfaceAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
}

export class WebhookAddressPolicy {
  readonly allow: WebhookAllowList;
  private readonly resolve: WebhookLookup;

  constructor(private readonly options: WebhookAddressOptions = {}) {
    const { allow, problems } = parseWebhookAllow(options.allow ?? []);
    // The setting was checked where it was read (config.ts); an embedder passing a bad entry learns it here.
    if (problems.length > 0) throw new UsageError(`The webhook allow-list is not valid: ${problems.join("; ")}`);
    this.allow = allow;
    this.resolve = options.lookup ?? systemResolver;
  }

  /**
   * What is known wrong from the URL alone (at submit, and again before each delivery, since the allow-list may
   * have changed since): its scheme, an IP literal in a refused range, the service's own address.
   */
  literal(raw: string): WebhookRefusal | undefined {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return { rule: "scheme", message: `${raw} is ${WHAT.scheme}` };
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return { rule: "scheme", message: `${url.protocol}// is ${WHAT.scheme}` };
    const self = this.options.self?.();
    if (self?.urls.some((u) => sameOrigin(u, url))) return refusal("service", url.host, url.host);
    const host = url.hostname;
    if (!isIpLiteral(host)) return undefined;
    return this.address(host, host.replace(/^\[|\]$/g, ""), defaultPort(url));
  }

  /**
   * Whether a connection to `address` for the URL host `host` (a name, or the literal itself) on `port` is
   * refused, and by which rule.
   */
  address(host: string, address: string, port: number): WebhookRefusal | undefined {
    if (this.isService(address, port)) return refusal("service", host, address);
    if (allowsName(this.allow, host) || allowsAddress(this.allow, address)) return undefined;
    const rule = classifyAddress(address);
    if (rule) return refusal(rule, host, address);
    const key = addressKey(address);
    if ((this.options.hostAddresses ?? interfaceAddresses)().some((a) => addressKey(a) === key)) return refusal("this-host", host, address);
    return undefined;
  }

  /**
   * The socket `lookup` for a delivery to `url`: resolves the name, refuses the connection (with a WebhookRefused)
   * when any address it has is refused, and otherwise hands the socket exactly the addresses it checked.
   */
  lookupFor(url: URL): LookupFunction {
    const port = defaultPort(url);
    return (
      hostname: string,
      options: LookupOptions,
      callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
    ) => {
      this.resolve(hostname).then(
        (found) => {
          for (const a of found) {
            const refused = this.address(hostname, a.address, port);
            if (refused) return callback(new WebhookRefused(refused), "");
          }
          const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : options.family;
          const usable = family ? found.filter((a) => a.family === family) : found;
          if (usable.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), "");
          if (options.all) return callback(null, usable);
          return callback(null, usable[0]!.address, usable[0]!.family);
        },
        (err: NodeJS.ErrnoException) => callback(err, ""),
      );
    };
  }

  private isService(address: string, port: number): boolean {
    const self = this.options.self?.();
    if (!self || self.port !== port) return false;
    const key = addressKey(address);
    if (WILDCARDS.has(self.host)) {
      if (classifyAddress(address) === "loopback" || classifyAddress(address) === "unspecified") return true;
      return (this.options.hostAddresses ?? interfaceAddresses)().some((a) => addressKey(a) === key);
    }
    if (self.host === "localhost") return classifyAddress(address) === "loopback";
    return addressKey(self.host) === key;
  }
}

function sameOrigin(a: string, b: URL): boolean {
  try {
    const u = new URL(a);
    return u.protocol === b.protocol && u.hostname === b.hostname && defaultPort(u) === defaultPort(b);
  } catch {
    return false;
  }
}

function refusal(rule: WebhookRule, host: string, address: string): WebhookRefusal {
  const what = host === address || host === `[${address}]` ? `${address} is ${WHAT[rule]}` : `${host} resolves to ${address}, ${WHAT[rule]}`;
  const admitted =
    rule === "service" ? "webhooks never go to the service itself" : "webhooks go to public addresses unless the operator allows others (--webhook-allow)";
  return { rule, message: `refused by the webhook rule "${rule}": ${what}; ${admitted}` };
}
