export type {
  HttpLimiter,
  OnRejected,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';
export * from './client-ip.ts';
export * from './decorators.ts';
export * from './exception.ts';
export * from './guard.ts';
export * from './module.ts';
export * from './tokens.ts';
