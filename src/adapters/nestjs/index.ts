export type {
  HttpLimiter,
  OnRejected,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteCost,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';
export type { RequestTimeout, RequestTimeoutsOptions, RouteTimeout } from '../../http/timeouts/index.ts';
export { isTimeoutReason, requestTimeoutOf } from '../../http/timeouts/index.ts';
export * from './client-ip.ts';
export * from './decorators.ts';
export * from './exception.ts';
export { RATE_LIMITED_CODE } from './graphql.ts';
export * from './guard.ts';
export * from './module.ts';
export * from './redis-throttler-storage.ts';
export * from './request-of.ts';
export * from './throttler-storage.ts';
export * from './timeout-decorators.ts';
export * from './timeout-interceptor.ts';
export * from './timeouts-module.ts';
export * from './tokens.ts';
