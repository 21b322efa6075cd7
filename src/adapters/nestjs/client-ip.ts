import type { ExecutionContext } from '@nestjs/common';
import { type ClientIpOptions, clientIp as httpClientIp } from '../../http/client-ip.ts';
import type { RequestLike } from '../../http/request.ts';
import { requestOf } from './request-of.ts';

export { type ClientIpOptions, UNKNOWN_CLIENT } from '../../http/client-ip.ts';

/**
 * The client key of a Nest HTTP request or GraphQL resolver call, from its `ExecutionContext`: floodgate's
 * `clientIp()` on the platform's request (see {@link requestOf}), so it follows the platform's trust setting (Express `app.set('trust proxy', …)`, Fastify
 * `trustProxy`) unless `trustedProxies` or `trustedHops` are given.
 */
export function clientIp(options?: ClientIpOptions): (context: ExecutionContext) => string {
  const key = httpClientIp(options);
  return (context) => {
    const request = requestOf<RequestLike>(context);
    if (request === undefined)
      throw new TypeError(`clientIp(): no HTTP request in a ${context.getType()} context`);
    return key(request);
  };
}
