import ipaddr from 'ipaddr.js';
import { describe } from '../duration.ts';
import { ownText } from '../limiters/partitioned.ts';
import { headerOf, peerAddress, type RequestLike, type Shape, shapeOf } from './request.ts';

/** A forwarded header that {@link clientIp} can read. */
export type ForwardedHeader = 'x-forwarded-for' | 'forwarded';

/** Options of {@link clientIp}. */
export interface ClientIpOptions {
  /**
   * Proxies whose forwarded headers are believed: CIDR ranges or single addresses, IPv4 or IPv6
   * (`'10.0.0.0/8'`, `'2001:db8::/32'`, `'127.0.0.1'`). Headers are read only when the socket peer is one of
   * them, and the client is the rightmost address in the header that is not one of them.
   * Not together with `trustedHops`.
   */
  trustedProxies?: readonly string[];
  /**
   * The number of proxies in front of the application, the socket peer included: the client is the address
   * `trustedHops` entries from the right of the forwarded header. Use it only when every request is known to
   * pass through exactly that many proxies; prefer `trustedProxies`. Not together with `trustedProxies`.
   */
  trustedHops?: number;
  /** IPv6 clients are keyed by this prefix length, 1–128. Default 64 (one customer's network, usually). */
  ipv6Subnet?: number;
  /**
   * Which forwarded headers to read, once a trusted option is set. Default both. When a request carries both
   * and they name different clients, floodgate cannot tell which one your proxy wrote, so it keys the request
   * by the socket peer: list only the header your proxy sets.
   */
  headers?: readonly ForwardedHeader[];
}

/** The key of a request whose socket peer is unknown (closed socket, unix socket) or unparseable. */
export const UNKNOWN_CLIENT = 'floodgate:unknown-client';

/** How many entries of a forwarded header are walked before giving up (falling back to the socket peer). */
const MAX_ENTRIES = 32;
/** The longest header entry looked at; a `Forwarded` element may carry `by=`, `host=` and `proto=` too. */
const MAX_ELEMENT_LENGTH = 512;
/** The longest address text parsed (an IPv6 with an embedded IPv4 is 45 characters, plus a zone id). */
const MAX_ADDRESS_LENGTH = 64;
/** Parsed IPv6 addresses kept per `clientIp` instance; the map is emptied when full. */
const IPV6_CACHE_SIZE = 1024;

const COMMA = 44;
const DOT = 46;
const ZERO = 48;
const NINE = 57;

/**
 * Returns the client key of a request: its socket peer address by default, forwarded headers
 * (`X-Forwarded-For`, RFC 7239 `Forwarded`) only when the peer is a trusted proxy.
 *
 * Keys are canonical strings: `'203.0.113.7'` for IPv4 (IPv4-mapped IPv6 peers included), `'2001:db8:1:2::/64'`
 * for IPv6 (grouped by `ipv6Subnet`; with 128, the bare address). Ports, brackets and zone ids are dropped.
 *
 * Forwarded headers are walked from the right; multiple header lines count as one list, in order. What the
 * walk cannot read never throws and never lets a client choose its key; the request is keyed by its socket
 * peer when the walk meets an entry that is not a strict address (`unknown`, `_hidden`, an empty entry,
 * `127.1`, `0x7f.0.0.1`, octal or other non-decimal IPv4 forms, a `Forwarded` element without exactly one
 * `for=`), an entry longer than 512 characters, or more than 32 trusted entries. When every entry is a trusted
 * proxy, or a hop count is larger than the list, the client is the leftmost entry: each entry was written by a
 * trusted hop. A socket peer that is missing or unparseable is keyed {@link UNKNOWN_CLIENT}.
 *
 * @example
 * const key = clientIp({ trustedProxies: ['10.0.0.0/8'] });
 * key(req); // '203.0.113.7'
 */
export function clientIp(options: ClientIpOptions = {}): (req: RequestLike) => string {
  const { trustedProxies, trustedHops, ipv6Subnet = 64, headers } = options;
  if (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128) {
    throw new RangeError(
      `clientIp: ipv6Subnet must be an integer from 1 to 128; got ${describe(ipv6Subnet)}`,
    );
  }
  if (trustedProxies !== undefined && trustedHops !== undefined) {
    throw new TypeError('clientIp: set trustedProxies or trustedHops, not both');
  }
  if (
    trustedHops !== undefined &&
    (!Number.isInteger(trustedHops) || trustedHops < 0 || trustedHops > MAX_ENTRIES)
  ) {
    throw new RangeError(
      `clientIp: trustedHops must be an integer from 0 to ${MAX_ENTRIES}; got ${describe(trustedHops)}`,
    );
  }
  const ranges = parseTrustedProxies(trustedProxies ?? []);
  const [readXff, readForwarded] = parseHeaders(
    headers,
    trustedProxies !== undefined || trustedHops !== undefined,
  );
  const addresses = new AddressParser(ranges, ipv6Subnet);

  // The last peer's parse, by its address text: requests come in runs from one connection (keep-alive, bursts),
  // and node hands out the same string for every request of a socket.
  let lastPeerText: string | undefined;
  let lastPeer: Parsed | undefined;
  const peerOf = (req: RequestLike, shape: Shape): Parsed | undefined => {
    const raw = peerAddress(req, shape);
    if (raw === undefined) return undefined;
    if (raw === lastPeerText) return lastPeer;
    const text = bareAddress(raw);
    const parsed = text === undefined ? undefined : addresses.parse(text);
    lastPeerText = raw;
    lastPeer = parsed;
    return parsed;
  };

  if (trustedProxies === undefined && !trustedHops) {
    return (req) => peerOf(req, shapeOf(req))?.key ?? UNKNOWN_CLIENT;
  }

  /** The client named by one forwarded header, walked from the right; the peer's key when it cannot tell. */
  const walk = (peer: Parsed | undefined, value: string | string[], entryAddress: EntryAddress): string => {
    const entries = new EntriesFromRight(value);
    if (trustedHops !== undefined) {
      let chosen: string | undefined;
      for (let i = 0; i < trustedHops; i++) {
        const entry = entries.next();
        if (entry === undefined) break;
        chosen = entry;
      }
      return (
        ((chosen === undefined ? undefined : addresses.parseEntry(chosen, entryAddress)) ?? peer)?.key ??
        UNKNOWN_CLIENT
      );
    }
    let furthest = peer;
    for (let i = 0; i < MAX_ENTRIES; i++) {
      const entry = entries.next();
      if (entry === undefined) return furthest?.key ?? UNKNOWN_CLIENT;
      const hop = addresses.parseEntry(entry, entryAddress);
      if (hop === undefined) break;
      if (!hop.trusted) return hop.key;
      furthest = hop;
    }
    return peer?.key ?? UNKNOWN_CLIENT;
  };

  return (req) => {
    const shape = shapeOf(req);
    const peer = peerOf(req, shape);
    // The common case: a peer we do not trust, whose headers are never read.
    if (trustedHops === undefined && peer?.trusted !== true) return peer?.key ?? UNKNOWN_CLIENT;
    const xff = readXff ? headerOf(req, 'x-forwarded-for', shape) : undefined;
    const forwarded = readForwarded ? headerOf(req, 'forwarded', shape) : undefined;
    if (xff === undefined && forwarded === undefined) return peer?.key ?? UNKNOWN_CLIENT;
    const fromXff = xff === undefined ? undefined : walk(peer, xff, xffAddress);
    const fromForwarded = forwarded === undefined ? undefined : walk(peer, forwarded, forwardedAddress);
    if (fromXff !== undefined && fromForwarded !== undefined && fromXff !== fromForwarded) {
      return peer?.key ?? UNKNOWN_CLIENT;
    }
    return fromXff ?? fromForwarded ?? UNKNOWN_CLIENT;
  };
}

type EntryAddress = (entry: string) => string | undefined;

/** A parsed address: its key, and whether it is a trusted proxy. */
interface Parsed {
  readonly key: string;
  readonly trusted: boolean;
}

interface TrustedRanges {
  /** [network, mask] pairs over unsigned 32-bit addresses. */
  readonly v4: ReadonlyArray<readonly [number, number]>;
  readonly v6: ReadonlyArray<[ipaddr.IPv6, number]>;
}

/** Turns bare address text (no port, no brackets) into a key and a trust bit, strictly. */
class AddressParser {
  private readonly v6Cache = new Map<string, Parsed>();

  constructor(
    private readonly ranges: TrustedRanges,
    private readonly ipv6Subnet: number,
  ) {}

  /** Parses the address of a forwarded-header entry. */
  parseEntry(entry: string, entryAddress: EntryAddress): Parsed | undefined {
    const text = entryAddress(entry);
    return text === undefined ? undefined : this.parse(text);
  }

  parse(text: string): Parsed | undefined {
    const v4 = parseIPv4(text);
    // Strict four-part decimal is already canonical: the text is the key.
    if (v4 >= 0) return { key: ownText(text), trusted: this.trustsV4(v4) };
    // Parsing IPv6 with ipaddr.js costs microseconds; the same clients come back.
    const cached = this.v6Cache.get(text);
    if (cached !== undefined) return cached;
    const address = parseIPv6(text);
    if (address === undefined) return undefined;
    let parsed: Parsed;
    if (typeof address === 'number') {
      parsed = { key: formatIPv4(address), trusted: this.trustsV4(address) };
    } else {
      parsed = { key: ipv6Key(address, this.ipv6Subnet), trusted: this.trustsV6(address) };
    }
    if (this.v6Cache.size >= IPV6_CACHE_SIZE) this.v6Cache.clear();
    // Owned text: the address may be cut from a long forwarded header, which the cache must not keep alive.
    this.v6Cache.set(ownText(text), parsed);
    return parsed;
  }

  private trustsV4(address: number): boolean {
    for (const [network, mask] of this.ranges.v4) if ((address & mask) >>> 0 === network) return true;
    return false;
  }

  private trustsV6(address: ipaddr.IPv6): boolean {
    for (const range of this.ranges.v6) if (address.match(range)) return true;
    return false;
  }
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
function bareAddress(entry: string): string | undefined {
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

function xffAddress(entry: string): string | undefined {
  return bareAddress(entry.trim());
}

/**
 * The address of one RFC 7239 `Forwarded` element (`for=192.0.2.60;proto=http`,
 * `for="[2001:db8:cafe::17]:4711"`), or undefined when it has no `for=` or more than one, or an unreadable one.
 */
function forwardedAddress(element: string): string | undefined {
  let value: string | undefined;
  let start = 0;
  while (start <= element.length) {
    let end = element.indexOf(';', start);
    if (end < 0) end = element.length;
    const pair = element.slice(start, end).trim();
    if (pair.length > 4 && pair.charCodeAt(3) === 61 /* = */ && pair.slice(0, 3).toLowerCase() === 'for') {
      if (value !== undefined) return undefined;
      value = pair.slice(4);
    }
    start = end + 1;
  }
  if (value === undefined) return undefined;
  if (value.charCodeAt(0) === 34 /* " */) {
    // A quoted address never needs an escape; one that has an escape or a stray quote is not an address.
    if (value.length < 2 || value.charCodeAt(value.length - 1) !== 34) return undefined;
    value = value.slice(1, -1);
  }
  if (value.includes('"') || value.includes('\\')) return undefined;
  return bareAddress(value);
}

/**
 * Reads a header's comma-separated entries from the right, across header lines (the last line first), without
 * splitting the whole header: only the few rightmost entries matter, and a client may send megabytes.
 * Splitting on every comma, even inside a quoted string, is deliberate: the entries our proxies append on the
 * right hold no commas, so a client's unbalanced quote on the left cannot swallow them.
 */
class EntriesFromRight {
  private readonly lines: readonly string[];
  private line: number;
  private end: number;

  constructor(value: string | string[]) {
    this.lines = typeof value === 'string' ? [value] : value;
    this.line = this.lines.length - 1;
    this.end = this.line >= 0 ? this.lines[this.line].length : 0;
  }

  /** The next entry leftwards (possibly empty; `''` too when longer than we read), or undefined at the start. */
  next(): string | undefined {
    if (this.line < 0) return undefined;
    const text = this.lines[this.line];
    const stop = Math.max(0, this.end - MAX_ELEMENT_LENGTH - 1);
    let i = this.end - 1;
    while (i >= stop && text.charCodeAt(i) !== COMMA) i--;
    if (i < 0 || text.charCodeAt(i) === COMMA) {
      const entry = text.slice(i + 1, this.end);
      if (i >= 0) {
        this.end = i;
      } else {
        this.line--;
        this.end = this.line >= 0 ? this.lines[this.line].length : 0;
      }
      return entry;
    }
    this.line = -1;
    return '';
  }
}

function parseTrustedProxies(list: unknown): TrustedRanges {
  if (!Array.isArray(list)) {
    throw new TypeError(
      `clientIp: trustedProxies must be an array of addresses or CIDR ranges; got ${describe(list)}`,
    );
  }
  const v4: Array<readonly [number, number]> = [];
  const v6: Array<[ipaddr.IPv6, number]> = [];
  list.forEach((entry: unknown, index) => {
    const range = typeof entry === 'string' ? parseRange(entry.trim()) : undefined;
    if (range === undefined) {
      throw new TypeError(
        `clientIp: trustedProxies[${index}] must be an IPv4 or IPv6 address or CIDR range such as '10.0.0.0/8' or '2001:db8::/32'; got ${describe(entry)}`,
      );
    }
    if (typeof range[0] === 'number') {
      const bits = range[1];
      const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
      v4.push([(range[0] & mask) >>> 0, mask]);
    } else {
      v6.push(range as [ipaddr.IPv6, number]);
    }
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

function parseHeaders(headers: unknown, trusting: boolean): [xff: boolean, forwarded: boolean] {
  if (headers === undefined) return [true, true];
  if (!trusting) {
    throw new TypeError(
      'clientIp: headers is read only from trusted proxies: set trustedProxies or trustedHops too',
    );
  }
  if (!Array.isArray(headers) || headers.length === 0) {
    throw new TypeError(
      `clientIp: headers must be a non-empty array of 'x-forwarded-for' and 'forwarded'; got ${describe(headers)}`,
    );
  }
  let xff = false;
  let forwarded = false;
  for (const name of headers) {
    const lower = typeof name === 'string' ? name.toLowerCase() : undefined;
    if (lower === 'x-forwarded-for') xff = true;
    else if (lower === 'forwarded') forwarded = true;
    else {
      throw new TypeError(
        `clientIp: headers may list 'x-forwarded-for' and 'forwarded'; got ${describe(name)}`,
      );
    }
  }
  return [xff, forwarded];
}
