// The client-key and header helpers rate limiting is built with, so `floodgate/http` is the one place to import from.
export { type ClientIpOptions, clientIp, type ForwardedHeader, UNKNOWN_CLIENT } from '../client-ip.ts';
export { headerValue, UNVALIDATED_KEY, type ValidatedKeyOptions, validatedKey } from '../keys.ts';
export {
  type HeaderStyle,
  type PartitionKeyHasher,
  type PartitionKeyHasherOptions,
  type PolicyState,
  partitionKeyHasher,
  QUOTA_EXCEEDED_TYPE,
  type QuotaUnit,
  rateLimitHeaders,
  rejectionBody,
  retryAfterSeconds,
} from '../ratelimit-headers.ts';
export type { HttpRequest } from '../request.ts';
export { Decision, RateLimiting } from './engine.ts';
export type { RateLimitInfo, RateLimitPolicyInfo } from './info.ts';
export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicy,
  RateLimitPolicyOptions,
  RejectedContext,
  RejectingLimiter,
  RouteCost,
  RouteLimit,
} from './options.ts';
export type { RouteLimits } from './route.ts';
export type { Result, RouteMetrics } from './route-metrics.ts';
