import { type ClientIpOptions, clientIp as httpClientIp } from '../../http/client-ip.ts';
import type { KoaContextLike } from '../../http/request.ts';

export { type ClientIpOptions, UNKNOWN_CLIENT } from '../../http/client-ip.ts';

/** What {@link clientIp} reads of Koa's `ctx` (or `ctx.request`): `req`, `app.proxy`, `app.maxIpsCount`, `ip`. */
export type KoaClientIpContext = KoaContextLike;

/**
 * The client key of a Koa request, following the app's own trust setting: with `app.proxy = true` it is `ctx.ip`
 * (Koa's reading of `app.proxyIpHeader`, limited to the last `app.maxIpsCount` entries), otherwise the socket
 * peer. It is `floodgate/http`'s `clientIp()`, which reads a Koa `ctx` this way, typed for Koa: keys are
 * canonical (IPv4 as is, IPv4-mapped IPv6 included, IPv6 grouped by `ipv6Subnet`, default /64), and
 * `trustedProxies` or `trustedHops` override the app's setting.
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
  return httpClientIp(options);
}
