import { type ClientIpOptions, clientIp as httpClientIp, UNKNOWN_CLIENT } from '../../http/client-ip.ts';
import { AddressParser, bareAddress, parseTrustedProxies } from '../../http/ip-address.ts';
import type { RequestLike } from '../../http/request.ts';
import { warnOnce } from '../../http/warnings.ts';

export { type ClientIpOptions, UNKNOWN_CLIENT } from '../../http/client-ip.ts';

/** What {@link clientIp} reads of Koa's `ctx`. */
export interface KoaClientIpContext {
  readonly ip: string;
  /** The node request: the socket peer and raw headers are read from it, as `clientIp()` reads node's. */
  readonly req: object;
  readonly app: { readonly proxy: boolean; readonly maxIpsCount?: number };
}

/**
 * The client key of a Koa request, following the app's own trust setting: with `app.proxy = true` it is `ctx.ip`
 * (Koa's reading of `app.proxyIpHeader`, limited to the last `app.maxIpsCount` entries), otherwise the socket
 * peer. Keys are canonical like `floodgate`'s `clientIp()`: IPv4 as is (IPv4-mapped IPv6 included), IPv6 grouped
 * by `ipv6Subnet` (default /64). `trustedProxies` or `trustedHops` override the app's setting, exactly as with
 * `floodgate`'s `clientIp()`.
 *
 * `app.proxy = true` with `app.maxIpsCount` 0 (Koa's default) believes the leftmost entry of the header, which
 * any client writes: a warning (`FLOODGATE_TRUST_ALL_PROXIES`, once per process) says to set `maxIpsCount` to
 * the number of proxies in front of the app.
 *
 * @example
 * ```ts
 * app.proxy = true;
 * app.maxIpsCount = 1; // one proxy in front of the app
 * const limiter = rateLimiting({ global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }) });
 * ```
 */
export function clientIp(options: ClientIpOptions = {}): (ctx: KoaClientIpContext) => string {
  // Validates every option, and is the key whenever the app does not trust proxies.
  const byPeer = httpClientIp(options);
  if (options.trustedProxies !== undefined || options.trustedHops !== undefined) {
    return (ctx) => byPeer(ctx.req as RequestLike);
  }
  const addresses = new AddressParser(parseTrustedProxies([]), options.ipv6Subnet ?? 64);
  const validate = options.validate ?? true;
  let lastText: string | undefined;
  let lastKey = UNKNOWN_CLIENT;
  return (ctx) => {
    const app = ctx.app;
    // The node request is what floodgate's clientIp() reads fastest (and with its raw header lines).
    if (app?.proxy !== true) return byPeer(ctx.req as RequestLike);
    if (validate && !(Number(app.maxIpsCount) > 0)) {
      warnOnce(
        'FLOODGATE_TRUST_ALL_PROXIES',
        'floodgate: Koa app.proxy = true with app.maxIpsCount 0 trusts every proxy, so any client can choose its ' +
          'rate-limit key with X-Forwarded-For. Set app.maxIpsCount to the number of proxies in front of the app, ' +
          'or give clientIp({ trustedProxies }) its own list.',
      );
    }
    const ip = ctx.ip;
    if (ip === lastText) return lastKey;
    const text = typeof ip === 'string' ? bareAddress(ip) : undefined;
    const key = (text === undefined ? undefined : addresses.parse(text))?.key ?? UNKNOWN_CLIENT;
    lastText = ip;
    lastKey = key;
    return key;
  };
}
