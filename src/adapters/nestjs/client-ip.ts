import type { ExecutionContext } from '@nestjs/common';
import { type ClientIpOptions, clientIp as httpClientIp } from '../../http/client-ip.ts';
import type { RequestLike } from '../../http/request.ts';

export { type ClientIpOptions, UNKNOWN_CLIENT } from '../../http/client-ip.ts';

/**
 * The client key of a Nest HTTP request, from its `ExecutionContext`: floodgate's `clientIp()` on the platform's
 * request, so it follows the platform's trust setting (Express `app.set('trust proxy', …)`, Fastify
 * `trustProxy`) unless `trustedProxies` or `trustedHops` are given.
 */
export function clientIp(options?: ClientIpOptions): (context: ExecutionContext) => string {
  const key = httpClientIp(options);
  return (context) => key(context.switchToHttp().getRequest<RequestLike>());
}
