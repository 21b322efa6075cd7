import { type Duration, describe, parseDuration } from '../duration.ts';
import { ChainLimiter } from '../limiters/chain.ts';
import type { Clock } from '../limiters/core.ts';
import type { Lease } from '../limiters/lease.ts';
import { integer, object, oneOf, performanceClock } from '../limiters/options.ts';
import { PartitionedLimiter, partitioned } from '../limiters/partitioned.ts';
import { RateLimiter } from '../limiters/rate-limiter.ts';
import { rejectUnknown } from '../options/known.ts';

/**
 * What a call does when no permit can be had. A limiter with a queue always queues first (bounded by its
 * `queueLimit`, abortable through the request's `signal`); this option decides what happens beyond that:
 * - `'wait'` (default): with a time-based limiter that has no queue, sleep until the lease's `retryAfterMs` and
 *   ask again (no order among sleepers: give the limiter a queue for first-come, first-served); during a
 *   server's pause, wait until it ends. A full queue is still refused, with a {@link RateLimitedError}.
 * - `'throw'`: reject with a {@link RateLimitedError} (`reason` `'limit'`, `'queue-full'`, `'paused'`, …).
 * - `'respond'`: resolve with a local `429 Too Many Requests` that never reached the network.
 */
export type OnLimited = 'wait' | 'throw' | 'respond';

/** How answers from the server pause a partition. */
export interface PauseOptions {
  /** Statuses whose `Retry-After` or `RateLimit` fields pause the partition. Default `[429, 503]`. */
  statuses?: readonly number[];
  /** The longest pause honoured (a server may send a date years ahead). Default `'5m'`. */
  max?: Duration;
  /**
   * Up to this fraction of the pause is added at random, so that many clients paused together do not all come
   * back in the same instant. Only ever added: no call leaves before the time the server gave. Default 0.1.
   */
  jitter?: number;
  /** Partitions whose pause is remembered at once (expired pauses are dropped first). Default 10 000. */
  maxEntries?: number;
}

/** Retrying answers that paused the partition. */
export interface RetryOptions {
  /** Retries after the first attempt, each after the pause the server asked for. */
  attempts: number;
  /** Methods that may be retried. Default the idempotent ones: GET, HEAD, OPTIONS, TRACE, PUT, DELETE. */
  methods?: readonly string[];
}

/** Every option name of {@link PauseOptions}: any other is refused. */
export const PAUSE_OPTION_NAMES = [
  'statuses',
  'max',
  'jitter',
  'maxEntries',
] as const satisfies readonly (keyof PauseOptions)[];

/** Every option name of {@link RetryOptions}: any other is refused. */
export const RETRY_OPTION_NAMES = ['attempts', 'methods'] as const satisfies readonly (keyof RetryOptions)[];

/** The limiters a rate-limited client accepts. A partitioned limiter or chain receives the partition key. */
export type ClientLimiter = RateLimiter | PartitionedLimiter<string> | ChainLimiter<string>;

/** Options shared by {@link rateLimitedFetch} and {@link rateLimitInterceptor}. */
export interface ClientOptions {
  /**
   * The local quota. A plain limiter (`tokenBucket(...)`, `concurrency(...)`) is a template: each partition
   * (each origin, by default) gets its own state built from it. A partitioned limiter or a chain is used as is,
   * and is given the partition key as its resource (use `key: (k) => k` in it; tiers per origin then work).
   */
  limiter: ClientLimiter;
  /** The partition of a call. Default the URL's origin (`https://api.example.com`). */
  key?: (url: URL) => string;
  /** What a call does when no permit can be had. Default `'wait'`. */
  onLimited?: OnLimited;
  /** Server-driven pauses; `false` to ignore what servers say. */
  pause?: PauseOptions | false;
  /** Retries of answers that paused the partition: a count, or options. Default none. */
  retry?: number | RetryOptions;
  /** Partitions kept when `limiter` is a plain limiter. Default 10 000. */
  maxPartitions?: number;
  /** Monotonic milliseconds, for pauses. Default the plain limiter's clock, else `performance.now()`. */
  clock?: Clock;
  /** Wall-clock milliseconds, to read a `Retry-After` date from a response without `Date`. Default `Date.now`. */
  now?: () => number;
  /** Random numbers in [0, 1) for the jitter. Default `Math.random`. */
  random?: () => number;
}

/** Every option name of {@link ClientOptions}: any other is refused, with the closest of these named. */
export const CLIENT_OPTION_NAMES = [
  'limiter',
  'key',
  'onLimited',
  'pause',
  'retry',
  'maxPartitions',
  'clock',
  'now',
  'random',
] as const satisfies readonly (keyof ClientOptions)[];

/** What a limiter must offer the client: acquisitions by partition key. */
export interface KeyedLimiter {
  tryAcquire(key: string, permits?: number): Lease;
  acquire(key: string, permits?: number, options?: { signal?: AbortSignal }): Promise<Lease>;
}

/** Validated options. */
export interface ClientConfig {
  limiter: KeyedLimiter;
  key: ((url: URL) => string) | undefined;
  onLimited: OnLimited;
  pause: false | { statuses: readonly number[]; maxMs: number; jitter: number; maxEntries: number };
  retry: { attempts: number; methods: ReadonlySet<string> };
  clock: Clock;
  now: () => number;
  random: () => number;
}

const IDEMPOTENT = ['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE'];

/** Validates the options of `kind` (`'rateLimitedFetch'`, …); a bad one is a TypeError/RangeError naming it. */
export function clientConfig(kind: string, options: ClientOptions): ClientConfig {
  object(`${kind} options`, options);
  const onLimited = oneOf(`${kind}: onLimited`, options.onLimited, ['wait', 'throw', 'respond'], 'wait');
  const { limiter, clock: limiterClock } = keyedLimiter(kind, options, onLimited);
  if (options.key !== undefined && typeof options.key !== 'function') {
    throw new TypeError(`${kind}: key must be a function (url) => string; got ${describe(options.key)}`);
  }
  const clock = options.clock ?? limiterClock ?? performanceClock;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') {
    throw new TypeError(`${kind}: clock must be an object with a now() method; got ${describe(clock)}`);
  }
  for (const name of ['now', 'random'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new TypeError(`${kind}: ${name} must be a function; got ${describe(options[name])}`);
    }
  }
  return {
    limiter,
    key: options.key,
    onLimited,
    pause: pauseConfig(kind, options.pause),
    retry: retryConfig(kind, options.retry),
    clock,
    now: options.now ?? Date.now,
    random: options.random ?? Math.random,
  };
}

function keyedLimiter(
  kind: string,
  options: ClientOptions,
  onLimited: OnLimited,
): { limiter: KeyedLimiter; clock: Clock | undefined } {
  const limiter = options.limiter;
  if (limiter instanceof PartitionedLimiter || limiter instanceof ChainLimiter) {
    if (options.maxPartitions !== undefined) {
      throw new TypeError(`${kind}: maxPartitions applies to a plain limiter; set it on the partitioned one`);
    }
    return { limiter: limiter as KeyedLimiter, clock: undefined };
  }
  if (!(limiter instanceof RateLimiter)) {
    throw new TypeError(
      `${kind}: limiter must be a limiter (tokenBucket(...), concurrency(...), …), a partitioned limiter or a chain; got ${describe(limiter)}`,
    );
  }
  // Without a queue a concurrency limiter can give no time to wait for: 'wait' could only spin.
  if (onLimited === 'wait' && !limiter.algorithm.timeBased && limiter.options.queueLimit === 0) {
    throw new TypeError(
      `${kind}: onLimited 'wait' needs a queue on a concurrency limiter (queueLimit > 0); got queueLimit 0`,
    );
  }
  const maxPartitions =
    options.maxPartitions === undefined
      ? 10_000
      : integer(`${kind}: maxPartitions`, options.maxPartitions, 1);
  return {
    limiter: partitioned<string>({ key: (key) => key, limiter, maxPartitions }),
    clock: limiter.options.clock,
  };
}

function pauseConfig(kind: string, pause: PauseOptions | false | undefined): ClientConfig['pause'] {
  if (pause === false) return false;
  const options = pause === undefined ? {} : object(`${kind}: pause`, pause);
  rejectUnknown(`${kind}: pause`, options, PAUSE_OPTION_NAMES);
  const statuses = options.statuses ?? [429, 503];
  if (!Array.isArray(statuses) || statuses.some((s) => !Number.isInteger(s) || s < 100 || s > 599)) {
    throw new TypeError(`${kind}: pause.statuses must be a list of HTTP statuses; got ${describe(statuses)}`);
  }
  const jitter = options.jitter ?? 0.1;
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) {
    throw new RangeError(`${kind}: pause.jitter must be a number from 0 to 1; got ${describe(jitter)}`);
  }
  return {
    statuses,
    maxMs: options.max === undefined ? 300_000 : parseDuration(`${kind}: pause.max`, options.max),
    jitter,
    maxEntries:
      options.maxEntries === undefined ? 10_000 : integer(`${kind}: pause.maxEntries`, options.maxEntries, 1),
  };
}

function retryConfig(kind: string, retry: number | RetryOptions | undefined): ClientConfig['retry'] {
  const options = typeof retry === 'number' || retry === undefined ? { attempts: retry ?? 0 } : retry;
  object(`${kind}: retry`, options);
  rejectUnknown(`${kind}: retry`, options, RETRY_OPTION_NAMES);
  const attempts = integer(`${kind}: retry.attempts`, options.attempts, 0, 10);
  const methods = options.methods ?? IDEMPOTENT;
  if (!Array.isArray(methods) || methods.some((m) => typeof m !== 'string')) {
    throw new TypeError(`${kind}: retry.methods must be a list of method names; got ${describe(methods)}`);
  }
  return { attempts, methods: new Set(methods.map((m) => m.toUpperCase())) };
}
