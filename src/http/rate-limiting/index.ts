export { Decision, RateLimiting } from './engine.ts';
export type {
  HttpLimiter,
  OnRejected,
  PolicyOptions,
  PolicySpec,
  RateLimitingOptions,
  RejectedContext,
  RejectingLimiter,
  RouteLimit,
} from './options.ts';
export type { Result, RouteLimits } from './route.ts';
