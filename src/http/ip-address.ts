import ipaddr from 'ipaddr.js';
import { describe } from '../duration.ts';
import { ownText } from '../limiters/partitioned.ts';

/**
 * Address text to client keys, strictly: IPv4 and IPv6 parsing and formatting, trusted ranges. What
 * `clientIp()` reads from the socket and from forwarded-header entries.
 */

/** The longest address text parsed (an IPv6 with an embedded IPv4 is 45 characters, plus a zone id). */
const MAX_ADDRESS_LENGTH = 64;
/** Parsed IPv6 addresses kept per parser; the map is emptied when full. */
const IPV6_CACHE_SIZE = 1024;

const DOT = 46;
const ZERO = 48;
const NINE = 57;

/** A parsed address: its key, whether it is a trusted proxy, and whether it is loopback or private. */
export interface Parsed {
  readonly key: string;
  readonly trusted: boolean;
  /** Loopback, link-local or unique-local (private): a peer that is likely a proxy of the application's own. */
  readonly local: boolean;
}

export interface TrustedRanges {
  /** [network, mask] pairs over unsigned 32-bit addresses. */
  readonly v4: ReadonlyArray<readonly [number, number]>;
  readonly v6: ReadonlyArray<[ipaddr.IPv6, number]>;
}

/** Turns bare address text (no port, no brackets) into a key and a trust bit, strictly. */
export class AddressParser {
  private readonly v6Cache = new Map<string, Parsed>();

  constructor(
    private readonly ranges: TrustedRanges,
    private readonly ipv6Subnet: number,
  ) {}

  /** Parses the address of a forwarded-header entry (`entryAddress` strips what surrounds it). */
  parseEntry(entry: string, entryAddress: (entry: string) => string | undefined): Parsed | undefined {
    const text = entryAddress(entry);
    return text === undefined ? undefined : this.parse(text);
  }

  parse(text: string): Parsed | undefined {
    const v4 = parseIPv4(text);
    // Strict four-part decimal is already canonical: the text is the key.
    if (v4 >= 0) return { key: ownText(text), trusted: this.trustsV4(v4), local: inV4(LOCAL.v4, v4) };
    // Parsing IPv6 with ipaddr.js costs microseconds; the same clients come back.
    const cached = this.v6Cache.get(text);
    if (cached !== undefined) return cached;
    const address = parseIPv6(text);
    if (address === undefined) return undefined;
    let parsed: Parsed;
    if (typeof address === 'number') {
      parsed = { key: formatIPv4(address), trusted: this.trustsV4(address), local: inV4(LOCAL.v4, address) };
    } else {
      parsed = {
        key: ipv6Key(address, this.ipv6Subnet),
        trusted: this.trustsV6(address),
        local: inV6(LOCAL.v6, address),
      };
    }
    if (this.v6Cache.size >= IPV6_CACHE_SIZE) this.v6Cache.clear();
    // Owned text: the address may be cut from a long forwarded header, which the cache must not keep alive.
    this.v6Cache.set(ownText(text), parsed);
    return parsed;
  }

  private trustsV4(address: number): boolean {
    return inV4(this.ranges.v4, address);
  }

  private trustsV6(address: ipaddr.IPv6): boolean {
    return inV6(this.ranges.v6, address);
  }
}

function inV4(ranges: TrustedRanges['v4'], address: number): boolean {
  for (const [network, mask] of ranges) if ((address & mask) >>> 0 === network) return true;
  return false;
}

function inV6(ranges: TrustedRanges['v6'], address: ipaddr.IPv6): boolean {
  for (const range of ranges) if (address.match(range)) return true;
  return false;
}

/**
 * Parses strict four-part decimal IPv4 (`203.0.113.7`; no leading zeros, no hex, octal or short forms) to an
 * unsigned 32-bit number, or -1. It accepts exactly what `ipaddr.IPv4.isValidFourPartDecimal` accepts (the
 * tests check this), without its regular expressions: this runs on every request.
 *
 * @internal Exported for the tests.
 */
export function parseIPv4(text: string): number {
  const length = text.length;
  if (length < 7 || length > 15) return -1;
  let result = 0;
  let part = 0;
  let digits = 0;
  let parts = 0;
  for (let i = 0; i <= length; i++) {
    const code = i === length ? DOT : text.charCodeAt(i);
    if (code === DOT) {
      if (digits === 0 || part > 255) return -1;
      result = result * 256 + part;
      parts++;
      part = 0;
      digits = 0;
    } else if (code >= ZERO && code <= NINE) {
      // A leading zero is octal to some parsers and decimal to others: not an address we accept.
      if (digits === 1 && part === 0) return -1;
      part = part * 10 + (code - ZERO);
      digits++;
    } else {
      return -1;
    }
  }
  return parts === 4 ? result : -1;
}

function formatIPv4(address: number): string {
  return `${address >>> 24}.${(address >>> 16) & 255}.${(address >>> 8) & 255}.${address & 255}`;
}

/** Parses IPv6 text with ipaddr.js, strictly; IPv4-mapped addresses come back as IPv4 numbers. */
function parseIPv6(text: string): ipaddr.IPv6 | number | undefined {
  if (text.length > MAX_ADDRESS_LENGTH) return undefined;
  let lastColon = -1;
  let hasDot = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 58) lastColon = i;
    else if (code === DOT) hasDot = true;
    else if (!isHexDigit(code)) return undefined;
  }
  if (lastColon < 0) return undefined;
  // ipaddr.js reads an embedded IPv4 with parseInt, so `::ffff:0x7f.0.0.1` would pass: check it ourselves.
  if (hasDot && parseIPv4(text.slice(lastColon + 1)) < 0) return undefined;
  let address: ipaddr.IPv6;
  try {
    address = ipaddr.IPv6.parse(text);
  } catch {
    return undefined;
  }
  // ipaddr.js also turns the deprecated IPv4-compatible form `::1.2.3.4` into `::ffff:1.2.3.4`.
  // (Its isIPv4MappedAddress() matches against every special range: slow.)
  const parts = address.parts;
  if (
    parts[0] === 0 &&
    parts[1] === 0 &&
    parts[2] === 0 &&
    parts[3] === 0 &&
    parts[4] === 0 &&
    parts[5] === 0xffff
  ) {
    return parts[6] * 65536 + parts[7];
  }
  return address;
}

function isHexDigit(code: number): boolean {
  return (code >= ZERO && code <= NINE) || (code >= 97 && code <= 102) || (code >= 65 && code <= 70);
}

function ipv6Key(address: ipaddr.IPv6, subnet: number): string {
  if (subnet === 128) return formatIPv6(address.parts);
  const parts = address.parts.map((part, i) => {
    const bits = Math.min(16, Math.max(0, subnet - i * 16));
    return part & ((0xffff << (16 - bits)) & 0xffff);
  });
  return `${formatIPv6(parts)}/${subnet}`;
}

/**
 * RFC 5952 text of eight 16-bit groups, as ipaddr.js's toString() writes it (the tests check this) at a
 * fraction of its cost: lower-case hex, and the longest run of two or more zero groups, the first on a tie,
 * as `::`.
 *
 * @internal Exported for the tests.
 */
export function formatIPv6(parts: readonly number[]): string {
  let runStart = -1;
  let runLength = 1;
  for (let i = 0; i < 8; ) {
    if (parts[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && parts[j] === 0) j++;
    if (j - i > runLength) {
      runStart = i;
      runLength = j - i;
    }
    i = j;
  }
  if (runStart < 0) return parts.map(hex).join(':');
  return `${parts.slice(0, runStart).map(hex).join(':')}::${parts
    .slice(runStart + runLength)
    .map(hex)
    .join(':')}`;
}

function hex(part: number): string {
  return part.toString(16);
}

/**
 * Strips what surrounds an address in a header entry: brackets, a port (`1.2.3.4:5678`, `[::1]:80`, the
 * `Forwarded` obfuscated `_port`), an IPv6 zone id. Returns undefined for anything else that is not bare text.
 */
export function bareAddress(entry: string): string | undefined {
  if (entry.length === 0 || entry.length > MAX_ADDRESS_LENGTH) return undefined;
  let host = entry;
  if (entry.charCodeAt(0) === 91 /* [ */) {
    const close = entry.indexOf(']');
    if (close < 0) return undefined;
    if (close + 1 < entry.length && (entry.charCodeAt(close + 1) !== 58 || !isPort(entry.slice(close + 2)))) {
      return undefined;
    }
    host = entry.slice(1, close);
    // Brackets are for IPv6 only.
    if (!host.includes(':')) return undefined;
  } else {
    const colon = entry.indexOf(':');
    // One colon: IPv4 with a port. More: IPv6, which only carries a port inside brackets.
    if (colon >= 0 && entry.indexOf(':', colon + 1) < 0) {
      if (!isPort(entry.slice(colon + 1))) return undefined;
      host = entry.slice(0, colon);
    }
  }
  const zone = host.indexOf('%');
  if (zone >= 0) {
    if (!host.includes(':')) return undefined;
    host = host.slice(0, zone);
  }
  return host;
}

/** A decimal port, or the RFC 7239 obfuscated form `_` followed by letters, digits, `.`, `_`, `-`. */
function isPort(text: string): boolean {
  if (text.length === 0 || text.length > 16) return false;
  const obfuscated = text.charCodeAt(0) === 95; /* _ */
  if (!obfuscated && text.length > 5) return false;
  for (let i = obfuscated ? 1 : 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const ok = obfuscated
      ? isHexDigit(code) ||
        (code >= 97 && code <= 122) ||
        (code >= 65 && code <= 90) ||
        code === 46 ||
        code === 95 ||
        code === 45
      : code >= ZERO && code <= NINE;
    if (!ok) return false;
  }
  return !obfuscated || text.length > 1;
}

/**
 * The named ranges of proxy-addr (Express's `trust proxy`), accepted in `trustedProxies`: `'loopback'`,
 * `'linklocal'`, `'uniquelocal'`.
 */
export const NAMED_RANGES: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/** Parses `trustedProxies` (addresses, CIDR ranges, named ranges); throws a TypeError naming the entry. */
export function parseTrustedProxies(list: unknown): TrustedRanges {
  if (!Array.isArray(list)) {
    throw new TypeError(
      `clientIp: trustedProxies must be an array of addresses or CIDR ranges; got ${describe(list)}`,
    );
  }
  const v4: Array<readonly [number, number]> = [];
  const v6: Array<[ipaddr.IPv6, number]> = [];
  const add = (range: [number | ipaddr.IPv6, number]): void => {
    if (typeof range[0] === 'number') {
      const bits = range[1];
      const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
      v4.push([(range[0] & mask) >>> 0, mask]);
    } else {
      v6.push(range as [ipaddr.IPv6, number]);
    }
  };
  list.forEach((entry: unknown, index) => {
    const named = typeof entry === 'string' ? NAMED_RANGES[entry.trim()] : undefined;
    if (named !== undefined) {
      for (const text of named) add(parseRange(text)!);
      return;
    }
    const range = typeof entry === 'string' ? parseRange(entry.trim()) : undefined;
    if (range === undefined) {
      throw new TypeError(
        `clientIp: trustedProxies[${index}] must be an IPv4 or IPv6 address, a CIDR range such as '10.0.0.0/8' or '2001:db8::/32', or 'loopback', 'linklocal', 'uniquelocal'; got ${describe(entry)}`,
      );
    }
    add(range);
  });
  return { v4, v6 };
}

/** A trusted range: strict address text, optionally `/bits`. IPv4-mapped IPv6 ranges become IPv4 ranges. */
function parseRange(text: string): [number | ipaddr.IPv6, number] | undefined {
  const slash = text.indexOf('/');
  const addressText = slash < 0 ? text : text.slice(0, slash);
  const bitsText = slash < 0 ? undefined : text.slice(slash + 1);
  if (bitsText !== undefined && !/^\d{1,3}$/.test(bitsText)) return undefined;
  const v4 = parseIPv4(addressText);
  if (v4 >= 0) {
    const bits = bitsText === undefined ? 32 : Number(bitsText);
    return bits <= 32 ? [v4, bits] : undefined;
  }
  const bits = bitsText === undefined ? 128 : Number(bitsText);
  if (bits > 128 || addressText.includes('%')) return undefined;
  const address = parseIPv6(addressText);
  if (address === undefined) return undefined;
  if (typeof address === 'number') return bits >= 96 ? [address, bits - 96] : undefined;
  return [address, bits];
}

/** Loopback, link-local and unique-local ranges: peers whose forwarded headers are likely our own proxies'. */
const LOCAL: TrustedRanges = parseTrustedProxies(['loopback', 'linklocal', 'uniquelocal']);
