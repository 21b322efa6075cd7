import { type Duration, describe, parseDuration } from '../duration.ts';
import type { Clock } from '../limiters/core.ts';
import { isLimiter, type MemoryLimiter } from '../limiters/limiter.ts';
import type { PartitionedLimiter } from '../limiters/partitioned.ts';
import type { RateLimiter } from '../limiters/rate-limiter.ts';
import { rejectUnknown } from '../options/known.ts';
import type { RedisClientLike } from './client.ts';

/**
 * What a decision gets when Redis fails or misses its deadline: grant (`'fail-open'`), reject with reason
 * `'unavailable'` (`'fail-closed'`), or ask an in-memory insurance limiter (a plain limiter shared by every key
 * of this process, or a partitioned one keyed by the decision's partition key; any limiter in memory that is not a
 * chain).
 */
export type UnavailablePolicy =
  | 'fail-open'
  | 'fail-closed'
  | RateLimiter
  | PartitionedLimiter<string>
  | MemoryLimiter;

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /** An ioredis (`new Redis()`, `new Cluster()`) or node-redis (`createClient()`, `createCluster()`) client, connected. */
  client: RedisClientLike;
  /** Prepended to every key. Default `'floodgate:'`. No braces: the store owns the `{hash tag}`. */
  prefix?: string;
  /** Each decision's own deadline, whatever the client's timeouts and offline queue do. Default 50 ms. */
  timeoutMs?: Duration;
  /** What a decision gets when Redis fails or is late. Default `'fail-open'`. */
  onUnavailable?: UnavailablePolicy;
  /** After a failure, decisions skip Redis (straight to `onUnavailable`) for this long, then try it again. Default 500 ms. */
  retryIntervalMs?: Duration;
  /**
   * Gather the decisions issued in one tick into one script call per node (per slot in Cluster); one issued while
   * nothing is in flight goes at once. Default true.
   */
  coalesce?: boolean;
  /** A concurrency lease not renewed for this long is dropped (its process died). Renewed every third of it. Default 30 s. */
  leaseTtlMs?: Duration;
  /** Remember "this key is rejected until T" locally and answer without Redis until then. Default false. */
  cacheBlocked?: boolean;
  /**
   * Called with each Redis failure or missed deadline (the decision itself already has its answer). Without it
   * the store emits a `FloodgateWarning` once per outage (`FLOODGATE_REDIS_UNAVAILABLE`) and once when Redis
   * answers again (`FLOODGATE_REDIS_RECOVERED`); with it, nothing: the outage is yours to report.
   */
  onError?: (error: Error) => void;
  /**
   * Tests only: a clock whose value the script uses instead of Redis `TIME`, so the memory store's tables run
   * unchanged against Redis. Keys then live 10 minutes longer than their state, as this time is not Redis's.
   */
  clock?: Clock;
}

/** Every option name of {@link RedisStoreOptions}: any other is refused, with the closest of these named. */
export const REDIS_STORE_OPTION_NAMES = [
  'client',
  'prefix',
  'timeoutMs',
  'onUnavailable',
  'retryIntervalMs',
  'coalesce',
  'leaseTtlMs',
  'cacheBlocked',
  'onError',
  'clock',
] as const satisfies readonly (keyof RedisStoreOptions)[];

/** Validated options. */
export interface ResolvedOptions {
  prefix: string;
  timeoutMs: number;
  onUnavailable: UnavailablePolicy;
  retryIntervalMs: number;
  coalesce: boolean;
  leaseTtlMs: number;
  cacheBlocked: boolean;
  onError: ((error: Error) => void) | undefined;
  clock: Clock | undefined;
  ttlPadMs: number;
  /** Set by the store: a concurrency permit came back here (wake local waiters of that key). */
  onRelease: (key: string) => void;
}

/** Validates {@link RedisStoreOptions}: a TypeError naming the option and the value. */
export function resolveOptions(options: RedisStoreOptions): ResolvedOptions {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`redisStore options must be an object; got ${describe(options)}`);
  }
  rejectUnknown('redisStore', options, REDIS_STORE_OPTION_NAMES);
  const prefix = options.prefix ?? 'floodgate:';
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new TypeError(
      `redisStore: prefix must be a string without braces; got ${describe(options.prefix)}`,
    );
  }
  const policy = options.onUnavailable ?? 'fail-open';
  if (
    policy !== 'fail-open' &&
    policy !== 'fail-closed' &&
    !(isLimiter(policy) && policy.store.sync && policy.members === undefined)
  ) {
    throw new TypeError(
      `redisStore: onUnavailable must be 'fail-open', 'fail-closed' or an in-memory limiter; got ${describe(options.onUnavailable)}`,
    );
  }
  for (const name of ['coalesce', 'cacheBlocked'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'boolean') {
      throw new TypeError(`redisStore: ${name} must be a boolean; got ${describe(options[name])}`);
    }
  }
  if (options.onError !== undefined && typeof options.onError !== 'function') {
    throw new TypeError(`redisStore: onError must be a function; got ${describe(options.onError)}`);
  }
  const clock = options.clock;
  if (
    clock !== undefined &&
    (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function')
  ) {
    throw new TypeError(`redisStore: clock must be an object with a now() method; got ${describe(clock)}`);
  }
  return {
    prefix,
    timeoutMs: parseDuration('redisStore: timeoutMs', options.timeoutMs ?? 50),
    onUnavailable: policy,
    retryIntervalMs: parseDuration('redisStore: retryIntervalMs', options.retryIntervalMs ?? 500, true),
    coalesce: options.coalesce ?? true,
    leaseTtlMs: parseDuration('redisStore: leaseTtlMs', options.leaseTtlMs ?? 30_000),
    cacheBlocked: options.cacheBlocked ?? false,
    onError: options.onError,
    clock,
    ttlPadMs: clock ? 600_000 : 1000,
    onRelease: () => {},
  };
}
