export { Decision, RateLimiting } from './engine.ts';
export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicy,
  RateLimitPolicyOptions,
  RejectedContext,
  RejectingLimiter,
  RouteLimit,
} from './options.ts';
export type { Result, RouteLimits } from './route.ts';
