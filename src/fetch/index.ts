/**
 * `floodgate/fetch`: rate-limited outgoing calls. {@link rateLimitedFetch} wraps `fetch`;
 * {@link rateLimitInterceptor} does the same as an undici interceptor (undici types only: nothing loads undici).
 */
export type { CostOptions } from './cost.ts';
export { type LimitedReason, RateLimitedError, ThrottledError } from './errors.ts';
export { type CallOutcome, defaultIsFailure, isNetworkError } from './failure.ts';
export { type RateLimitedFetch, type RateLimitedFetchOptions, rateLimitedFetch } from './fetch.ts';
export type { ClientStatistics } from './gate.ts';
export {
  parseHttpDate,
  parseRateLimit,
  type RateLimitItem,
  rateLimitWaitMs,
  retryAfterMs,
} from './headers.ts';
export { LOCAL_HEADER } from './local-response.ts';
export type {
  AdaptiveOptions,
  BackoffOptions,
  ClientLimiter,
  ClientOptions,
  OnLimited,
  PauseOptions,
  RetryOptions,
} from './options.ts';
export {
  type InterceptedRequest,
  type RateLimitInterceptor,
  type RateLimitInterceptorOptions,
  rateLimitInterceptor,
} from './undici.ts';
export { jsonUsage, llmUsage, sseUsage } from './usage.ts';
