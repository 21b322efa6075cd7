export type { Limit, WindowSample } from './algorithms/limits/limit.ts';
export type { Replenishment } from './algorithms/token-bucket.ts';
export { type Duration, parseDuration } from './duration.ts';
export {
  type AdaptiveAcquireOptions,
  AdaptiveConcurrencyLimiter,
  type AdaptiveStatistics,
  adaptiveConcurrency,
} from './limiters/adaptive-concurrency.ts';
export type { AdaptiveAlgorithm, AdaptiveConcurrencyOptions } from './limiters/adaptive-options.ts';
export { ChainLimiter, chain } from './limiters/chain.ts';
export { ConcurrencyLimiter, type ConcurrencyOptions, concurrency } from './limiters/concurrency.ts';
export type { Clock, QueueOrder } from './limiters/core.ts';
export type { EventLoopMonitor } from './limiters/event-loop.ts';
export { FixedWindowLimiter, type FixedWindowOptions, fixedWindow } from './limiters/fixed-window.ts';
export {
  ChainLease,
  Lease,
  type LeaseFields,
  type LeaseMetadata,
  type RejectionReason,
  type ReleaseOutcome,
} from './limiters/lease.ts';
export type { Limiter, LimitShape, MemoryLimiter, MemorySlot, SlotCore } from './limiters/limiter.ts';
export { LockoutLimiter, type LockoutOptions, lockout } from './limiters/lockout.ts';
export { MemoryLimiterBase } from './limiters/memory-limiter.ts';
export type { QueueOptions, TimeOptions } from './limiters/options.ts';
export {
  type OverflowPolicy,
  PartitionedLimiter,
  type PartitionedOptions,
  partitioned,
} from './limiters/partitioned.ts';
export type { Priority } from './limiters/priority.ts';
export {
  type AcquireOptions,
  type LimiterSpec,
  RateLimiter,
  type Statistics,
} from './limiters/rate-limiter.ts';
export { SlidingWindowLimiter, type SlidingWindowOptions, slidingWindow } from './limiters/sliding-window.ts';
export type { LimiterStore, MemoryStore, RemoteStore } from './limiters/store.ts';
export { TokenBucketLimiter, type TokenBucketOptions, tokenBucket } from './limiters/token-bucket.ts';
