import type { ExecutionContext } from '@nestjs/common';
import { type CustomDecorator, SetMetadata } from '@nestjs/common';
import type { RouteLimit } from '../../http/rate-limiting/options.ts';

/** The metadata key under which `@RateLimit()` and `@NoRateLimit()` store a handler's or controller's setting. */
export const RATE_LIMIT_METADATA = 'floodgate:rateLimit';

/** An inline policy of `@RateLimit({ limiter, … })`: hooks receive Nest's `ExecutionContext`. */
export type NestRoutePolicy = Exclude<RouteLimit<ExecutionContext, ExecutionContext>, string | false>;

/**
 * Limits a handler (or every handler of a controller) by the global limiter and the named policy (or an inline
 * one), decided as one all-or-nothing chain, once per request, by `FloodgateGuard`. A handler's setting wins
 * over its controller's. Policy names are checked when the application starts.
 */
export function RateLimit(policy: string | NestRoutePolicy): CustomDecorator<string> {
  return SetMetadata(RATE_LIMIT_METADATA, policy);
}

/** No rate limiting on this handler (or controller), not even the global limiter. */
export function NoRateLimit(): CustomDecorator<string> {
  return SetMetadata(RATE_LIMIT_METADATA, false);
}
