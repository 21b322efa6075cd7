import { describe } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import { EntriesFromRight, forwardedAddress, xffAddress } from './forwarded.ts';
import { AddressParser, bareAddress, type Parsed, parseTrustedProxies } from './ip-address.ts';
import {
  headerOf,
  type KoaContextLike,
  nodeRequestOf,
  peerAddress,
  type RequestLike,
  Shape,
  shapeOf,
} from './request.ts';
import { warnOnce } from './warnings.ts';

/** A forwarded header that {@link clientIp} can read. */
export type ForwardedHeader = 'x-forwarded-for' | 'forwarded';

/** Options of {@link clientIp}. */
export interface ClientIpOptions {
  /**
   * Proxies whose forwarded headers are believed: CIDR ranges or single addresses, IPv4 or IPv6
   * (`'10.0.0.0/8'`, `'2001:db8::/32'`, `'127.0.0.1'`), or proxy-addr's named ranges `'loopback'`,
   * `'linklocal'`, `'uniquelocal'`. Headers are read only when the socket peer is one of them, and the client
   * is the rightmost address in the header that is not one of them. Not together with `trustedHops`. Setting it
   * (or `trustedHops`) overrides the framework's own trust setting.
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
  /**
   * Misconfiguration warnings (once per process, `process.emitWarning` with a `FLOODGATE_*` code): forwarded
   * headers from a loopback or private peer while nothing is trusted, a framework setting that trusts every
   * proxy (`trust proxy: true`), a request with no client address (Hono off Node without a key of its runtime).
   * Default true; `false` silences them.
   */
  validate?: boolean;
}

/** Every option name of {@link ClientIpOptions}: any other is refused. */
export const CLIENT_IP_OPTION_NAMES = [
  'trustedProxies',
  'trustedHops',
  'ipv6Subnet',
  'headers',
  'validate',
] as const satisfies readonly (keyof ClientIpOptions)[];

/** The key of a request whose socket peer is unknown (closed socket, unix socket) or unparseable. */
export const UNKNOWN_CLIENT = 'floodgate:unknown-client';

/** How many entries of a forwarded header are walked before giving up (falling back to the socket peer). */
const MAX_ENTRIES = 32;

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
 * Without `trustedProxies` or `trustedHops`, the framework's trust setting applies: on Express with
 * `app.set('trust proxy', …)` the address is `req.ip`, on Fastify `request.ip` (its `trustProxy`), on Koa
 * `ctx.ip` under `app.proxy = true` (with a warning while `app.maxIpsCount` is 0), grouped the same way (IPv6 by `ipv6Subnet`). node:http and Hono have no such setting: the socket peer. Off Node, Hono's
 * client address comes from the runtime where it offers one (Bun's `requestIP`, Deno's `remoteAddr`).
 *
 * @example
 * const key = clientIp({ trustedProxies: ['10.0.0.0/8'] });
 * key(req); // '203.0.113.7'
 */
export function clientIp(options: ClientIpOptions = {}): (req: RequestLike) => string {
  rejectUnknown('clientIp', options, CLIENT_IP_OPTION_NAMES);
  const { trustedProxies, trustedHops, ipv6Subnet = 64, headers, validate = true } = options;
  if (typeof validate !== 'boolean') {
    throw new TypeError(`clientIp: validate must be a boolean; got ${describe(validate)}`);
  }
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
    if (raw === undefined) {
      if (validate && shape === Shape.Hono) warnNoAddress();
      return undefined;
    }
    if (raw === lastPeerText) return lastPeer;
    const text = bareAddress(raw);
    const parsed = text === undefined ? undefined : addresses.parse(text);
    lastPeerText = raw;
    lastPeer = parsed;
    return parsed;
  };

  if (trustedProxies === undefined && !trustedHops) {
    // The framework's trust setting, where there is one; else the socket peer. Warnings while none was made.
    return (req) => {
      const shape = shapeOf(req);
      const framework = frameworkAddress(req, shape, validate);
      if (framework !== undefined) {
        const text = bareAddress(framework);
        return (text === undefined ? undefined : addresses.parse(text))?.key ?? UNKNOWN_CLIENT;
      }
      const peer = peerOf(req, shape);
      // Every request from a local peer until the warning fired (then never again): the first forwarded header
      // warns, whatever came before it. Node's raw header names are scanned, which builds no header object.
      if (validate && peer?.local === true && !forwardedWarned && hasForwardedHeader(req, shape)) {
        warnUntrustedProxy();
      }
      return peer?.key ?? UNKNOWN_CLIENT;
    };
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

/**
 * The client address as the framework's trust setting makes it, or undefined where the framework has none or it
 * trusts nothing (then the socket peer is the same, and cheaper): Express's `req.ip` under `trust proxy`,
 * Fastify's `request.ip`, Koa's `ctx.ip` under `app.proxy`.
 */
function frameworkAddress(req: RequestLike, shape: Shape, validate: boolean): string | undefined {
  if (shape === Shape.Fastify) {
    const trust = fastifyTrustProxy(req);
    if (!trust) return undefined;
    if (validate && trust === true && !trustAllWarned) warnTrustAll('Fastify trustProxy: true');
    const ip = (req as { ip?: unknown }).ip;
    return typeof ip === 'string' ? ip : undefined;
  }
  if (shape === Shape.Koa) {
    const app = (req as KoaContextLike).app;
    if (app?.proxy !== true) return undefined;
    // Koa's maxIpsCount 0 (its default) believes the leftmost entry, which any client writes.
    if (validate && !trustAllWarned && !(Number(app.maxIpsCount) > 0)) {
      warnTrustAll(
        'Koa app.proxy = true with app.maxIpsCount 0',
        'Set app.maxIpsCount to the number of proxies in front of the app',
      );
    }
    const ip = (req as KoaContextLike).ip;
    return typeof ip === 'string' ? ip : undefined;
  }
  if (shape !== Shape.Node) return undefined;
  const settings = (req as { app?: { settings?: Record<string, unknown> } }).app?.settings;
  if (settings === undefined) return undefined;
  const trust = settings['trust proxy'];
  if (!trust) return undefined;
  if (validate && trust === true && !trustAllWarned) warnTrustAll("Express app.set('trust proxy', true)");
  const ip = (req as { ip?: unknown }).ip;
  return typeof ip === 'string' ? ip : undefined;
}

// Fastify keeps its options under a symbol of its own (its initialConfig leaves trustProxy out): found once by
// its description, remembered per instance.
let kOptions: symbol | null | undefined;
const trustOf = new WeakMap<object, unknown>();

let lastPrototype: object | null = null;
let lastTrust: unknown;

function fastifyTrustProxy(req: RequestLike): unknown {
  // Fastify builds one request class per application (with trustProxy, one whose `ip` reads the headers): the
  // request's prototype answers for the application without reading `request.server` (a getter) each time.
  const prototype = Object.getPrototypeOf(req) as object | null;
  if (prototype !== null && prototype === lastPrototype) return lastTrust;
  const server = (req as { server?: object }).server;
  if (server === undefined || server === null) return undefined;
  lastPrototype = prototype;
  if (trustOf.has(server)) {
    lastTrust = trustOf.get(server);
    return lastTrust;
  }
  // A plugin's instance inherits the root's options: look along the prototype chain.
  for (let o: object | null = server; kOptions === undefined && o !== null; o = Object.getPrototypeOf(o)) {
    kOptions = Object.getOwnPropertySymbols(o).find((s) => s.description === 'fastify.options');
  }
  if (kOptions === undefined) kOptions = null;
  const options =
    kOptions === null ? undefined : (server as Record<symbol, { trustProxy?: unknown }>)[kOptions];
  const trust = options?.trustProxy;
  trustOf.set(server, trust);
  lastTrust = trust;
  return trust;
}

let forwardedWarned = false;
let trustAllWarned = false;

/**
 * Whether `req` carries `X-Forwarded-For` or `Forwarded`. On Node the raw header names are compared by length
 * first (15 and 9 characters), so a request without them costs a loop over a few string lengths and no header
 * object is built (node builds `headers` on first read).
 */
function hasForwardedHeader(req: RequestLike, shape: Shape): boolean {
  const raw = nodeRequestOf(req, shape)?.rawHeaders;
  if (raw === undefined) {
    return (
      headerOf(req, 'x-forwarded-for', shape) !== undefined || headerOf(req, 'forwarded', shape) !== undefined
    );
  }
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 15 || name.length === 9) {
      const lower = name.toLowerCase();
      if (lower === 'x-forwarded-for' || lower === 'forwarded') return true;
    }
  }
  return false;
}

// A loopback or private peer sending forwarded headers is likely the application's own proxy: every client
// then shares the proxy's key.
function warnUntrustedProxy(): void {
  forwardedWarned = true;
  warnOnce(
    'FLOODGATE_UNTRUSTED_PROXY',
    'floodgate: a request came from a loopback or private address with X-Forwarded-For/Forwarded, but no proxy ' +
      'is trusted, so every client behind that proxy shares one rate-limit key. Trust your proxy: ' +
      "clientIp({ trustedProxies: ['loopback'] }) (or its address or CIDR), Express app.set('trust proxy', …), " +
      'Fastify trustProxy. If the header is not from your proxy, pass clientIp({ validate: false }).',
  );
}

function warnTrustAll(
  setting: string,
  fix = "Trust only your proxies (a hop count, or addresses: 'loopback', '10.0.0.0/8')",
): void {
  trustAllWarned = true;
  warnOnce(
    'FLOODGATE_TRUST_ALL_PROXIES',
    `floodgate: ${setting} trusts every proxy, so any client can choose its rate-limit key with X-Forwarded-For. ` +
      `${fix}, or give clientIp({ trustedProxies }) its own list.`,
  );
}

function warnNoAddress(): void {
  warnOnce(
    'FLOODGATE_NO_CLIENT_ADDRESS',
    `floodgate: this request has no client address (Hono off Node without one from its runtime), so every client shares the key ${JSON.stringify(UNKNOWN_CLIENT)}. ` +
      "Key by your runtime's client address: behind Cloudflare, (c) => c.req.header('cf-connecting-ip'); " +
      "elsewhere Hono's getConnInfo(c).remote.address. See docs/rate-limiting.md, Hono off Node.",
  );
}

/** @internal For the tests: let each warning be checked again. */
export function resetClientIpWarnings(): void {
  forwardedWarned = false;
  trustAllWarned = false;
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
