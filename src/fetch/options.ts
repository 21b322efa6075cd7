import { type Duration, describe, parseDuration } from '../duration.ts';
import type { ChainLimiter } from '../limiters/chain.ts';
import type { Clock } from '../limiters/core.ts';
import type { Lease } from '../limiters/lease.ts';
import { isLimiter } from '../limiters/limiter.ts';
import { integer, object, oneOf, performanceClock } from '../limiters/options.ts';
import type { PartitionedLimiter } from '../limiters/partitioned.ts';
import { partitioned } from '../limiters/partitioned.ts';
import type { RateLimiter } from '../limiters/rate-limiter.ts';
import { type CallOutcome, defaultIsFailure } from './failure.ts';
import {
  ADAPTIVE_OPTIONS,
  BACKOFF_OPTIONS,
  CLIENT_OPTIONS,
  PAUSE_OPTIONS,
  RETRY_OPTIONS,
  rejectUnknown,
} from './option-names.ts';

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

/** The wait between attempts: capped exponential backoff with full jitter. */
export interface BackoffOptions {
  /** The ceiling of the first retry's wait, in milliseconds; each retry doubles it. Default 100. */
  baseMs?: number;
  /** The ceiling never goes above this, in milliseconds. Default 10 000. */
  maxMs?: number;
}

/** Retrying failed calls and answers that paused the partition. */
export interface RetryOptions {
  /** Retries after the first attempt (0 to 10). */
  attempts: number;
  /** Methods that may be retried. Default the idempotent ones: GET, HEAD, OPTIONS, TRACE, PUT, DELETE. */
  methods?: readonly string[];
  /**
   * Retries allowed per call made, over the last `windowMs`, per partition: with 0.2, retries add at most 20 %
   * (plus `minRetries`) to the calls. `false` for no budget (every call may use all its attempts). Default 0.2.
   */
  budget?: number | false;
  /** Retries allowed per window whatever the traffic, so that a quiet client still retries. Default 3. */
  minRetries?: number;
  /** The window over which the budget counts calls and retries, in milliseconds. Default 10 000. */
  windowMs?: number;
  /** The wait before each retry; `Retry-After` makes it longer, never shorter. */
  backoff?: BackoffOptions;
  /** Which outcomes are retried. Default `adaptive.isFailure`, else network errors, timeouts, 5xx but 501/505. */
  isFailure?: (outcome: CallOutcome) => boolean;
}

/** Client-side adaptive throttling: reject calls locally while the server fails most of them. */
export interface AdaptiveOptions {
  /**
   * How many times the accepted calls count against the calls made; the server may receive up to `k` times what
   * it accepts. Lower is more aggressive (at least 1). Default 2.
   */
  k?: number;
  /** The history the probability is computed over, in milliseconds. Default 10 000. */
  historyMs?: number;
  /**
   * The highest probability of rejecting a call, so that some calls always find out the server is back (Envoy's
   * admission control caps it likewise). An accept drawn at a probability `p` of 0.9 or more (or of
   * `maxRejection`, when lower) counts `1 / (1 − p)` accepts, so that recovery does not wait for the outage to
   * leave the history. Default 0.95.
   */
  maxRejection?: number;
  /** Below this many calls in the history, no call is rejected (one failure alone says little). Default 10. */
  minRequests?: number;
  /** Which outcomes count as failures. Default network errors, timeouts and 5xx but 501 and 505. */
  isFailure?: (outcome: CallOutcome) => boolean;
}

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
  /** Retries of failed calls and of answers that paused the partition: a count, or options. Default none. */
  retry?: number | RetryOptions;
  /** Adaptive throttling while the server fails: `true` for the defaults, or options. Default off. */
  adaptive?: boolean | AdaptiveOptions;
  /** Partitions kept when `limiter` is a plain limiter. Default 10 000. */
  maxPartitions?: number;
  /** Monotonic milliseconds, for pauses. Default the plain limiter's clock, else `performance.now()`. */
  clock?: Clock;
  /** Wall-clock milliseconds, to read a `Retry-After` date from a response without `Date`. Default `Date.now`. */
  now?: () => number;
  /** Random numbers in [0, 1) for jitter, backoff and throttling draws. Default `Math.random`. */
  random?: () => number;
}

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
  retry: {
    attempts: number;
    methods: ReadonlySet<string>;
    budget: false | { ratio: number; minRetries: number; windowMs: number };
    backoff: { baseMs: number; maxMs: number };
    isFailure: (outcome: CallOutcome) => boolean;
  };
  adaptive:
    | false
    | {
        k: number;
        historyMs: number;
        maxRejection: number;
        minRequests: number;
        isFailure: (outcome: CallOutcome) => boolean;
      };
  clock: Clock;
  now: () => number;
  random: () => number;
}

const IDEMPOTENT = ['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE'];

/** Validates the options of `kind` (`'rateLimitedFetch'`, …); a bad one is a TypeError/RangeError naming it. */
export function clientConfig(
  kind: string,
  options: ClientOptions,
  known: readonly string[] = CLIENT_OPTIONS,
): ClientConfig {
  object(`${kind} options`, options);
  rejectUnknown(kind, options, known);
  const onLimited = oneOf(`${kind}: onLimited`, options.onLimited, ['wait', 'throw', 'respond'], 'wait');
  const { limiter, clock: limiterClock } = keyedLimiter(kind, options, onLimited);
  if (options.key !== undefined && typeof options.key !== 'function') {
    throw new TypeError(`${kind}: key must be a function (url) => string; got ${describe(options.key)}`);
  }
  const clock = options.clock ?? limiterClock ?? performanceClock;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') {
    throw new TypeError(`${kind}: clock must be an object with a now() method; got ${describe(clock)}`);
  }
  const adaptive = adaptiveConfig(kind, options.adaptive);
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
    retry: retryConfig(kind, options.retry, adaptive),
    adaptive,
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
  const limiter: unknown = options.limiter;
  // In memory only: a call is decided synchronously when it can be.
  const inMemory = isLimiter(limiter) && limiter.store.sync;
  if (inMemory && (limiter.keyOf !== undefined || limiter.members !== undefined)) {
    if (options.maxPartitions !== undefined) {
      throw new TypeError(`${kind}: maxPartitions applies to a plain limiter; set it on the partitioned one`);
    }
    return { limiter: limiter as unknown as KeyedLimiter, clock: undefined };
  }
  // A plain limiter is the spec of one partition per key: it must be one of the built-in limiters.
  if (!inMemory || typeof (limiter as Partial<RateLimiter>).signature !== 'string') {
    throw new TypeError(
      `${kind}: limiter must be a limiter (tokenBucket(...), concurrency(...), …), a partitioned limiter or a chain; got ${describe(limiter)}`,
    );
  }
  const plain = limiter as RateLimiter;
  // Without a queue a concurrency limiter can give no time to wait for: 'wait' could only spin.
  if (onLimited === 'wait' && !plain.algorithm.timeBased && plain.options.queueLimit === 0) {
    throw new TypeError(
      `${kind}: onLimited 'wait' needs a queue on a concurrency limiter (queueLimit > 0); got queueLimit 0`,
    );
  }
  const maxPartitions =
    options.maxPartitions === undefined
      ? 10_000
      : integer(`${kind}: maxPartitions`, options.maxPartitions, 1);
  return {
    limiter: partitioned<string>({ key: (key) => key, limiter: plain, maxPartitions }),
    clock: plain.options.clock,
  };
}

function pauseConfig(kind: string, pause: PauseOptions | false | undefined): ClientConfig['pause'] {
  if (pause === false) return false;
  const options = pause === undefined ? {} : object(`${kind}: pause`, pause);
  rejectUnknown(`${kind}: pause`, options, PAUSE_OPTIONS);
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

function retryConfig(
  kind: string,
  retry: number | RetryOptions | undefined,
  adaptive: ClientConfig['adaptive'],
): ClientConfig['retry'] {
  const options = typeof retry === 'number' || retry === undefined ? { attempts: retry ?? 0 } : retry;
  object(`${kind}: retry`, options);
  rejectUnknown(`${kind}: retry`, options, RETRY_OPTIONS);
  const attempts = integer(`${kind}: retry.attempts`, options.attempts, 0, 10);
  const methods = options.methods ?? IDEMPOTENT;
  if (!Array.isArray(methods) || methods.some((m) => typeof m !== 'string')) {
    throw new TypeError(`${kind}: retry.methods must be a list of method names; got ${describe(methods)}`);
  }
  const ratio = options.budget ?? 0.2;
  if (ratio !== false && (typeof ratio !== 'number' || !(ratio >= 0 && ratio <= 10))) {
    throw new RangeError(
      `${kind}: retry.budget must be false or a number from 0 to 10; got ${describe(ratio)}`,
    );
  }
  const minRetries =
    options.minRetries === undefined ? 3 : integer(`${kind}: retry.minRetries`, options.minRetries, 0);
  const windowMs =
    options.windowMs === undefined ? 10_000 : integer(`${kind}: retry.windowMs`, options.windowMs, 1);
  const backoff = options.backoff === undefined ? {} : object(`${kind}: retry.backoff`, options.backoff);
  rejectUnknown(`${kind}: retry.backoff`, backoff, BACKOFF_OPTIONS);
  const baseMs =
    backoff.baseMs === undefined ? 100 : integer(`${kind}: retry.backoff.baseMs`, backoff.baseMs, 0);
  const maxMs =
    backoff.maxMs === undefined
      ? Math.max(10_000, baseMs)
      : integer(`${kind}: retry.backoff.maxMs`, backoff.maxMs, baseMs);
  return {
    attempts,
    methods: new Set(methods.map((m) => m.toUpperCase())),
    budget: ratio === false ? false : { ratio, minRetries, windowMs },
    backoff: { baseMs, maxMs },
    isFailure: failureTest(
      `${kind}: retry.isFailure`,
      options.isFailure ?? (adaptive === false ? undefined : adaptive.isFailure),
    ),
  };
}

function adaptiveConfig(
  kind: string,
  adaptive: boolean | AdaptiveOptions | undefined,
): ClientConfig['adaptive'] {
  if (adaptive === undefined || adaptive === false) return false;
  const options = adaptive === true ? {} : object(`${kind}: adaptive`, adaptive);
  rejectUnknown(`${kind}: adaptive`, options, ADAPTIVE_OPTIONS);
  const k = options.k ?? 2;
  if (typeof k !== 'number' || !(k >= 1 && k <= 1000)) {
    throw new RangeError(`${kind}: adaptive.k must be a number from 1 to 1000; got ${describe(k)}`);
  }
  const maxRejection = options.maxRejection ?? 0.95;
  if (typeof maxRejection !== 'number' || !(maxRejection > 0 && maxRejection <= 1)) {
    throw new RangeError(
      `${kind}: adaptive.maxRejection must be a number above 0, at most 1; got ${describe(maxRejection)}`,
    );
  }
  return {
    k,
    historyMs:
      options.historyMs === undefined ? 10_000 : integer(`${kind}: adaptive.historyMs`, options.historyMs, 1),
    maxRejection,
    minRequests:
      options.minRequests === undefined
        ? 10
        : integer(`${kind}: adaptive.minRequests`, options.minRequests, 0),
    isFailure: failureTest(`${kind}: adaptive.isFailure`, options.isFailure),
  };
}

function failureTest(name: string, value: unknown): (outcome: CallOutcome) => boolean {
  if (value === undefined) return defaultIsFailure;
  if (typeof value !== 'function') throw new TypeError(`${name} must be a function; got ${describe(value)}`);
  return value as (outcome: CallOutcome) => boolean;
}
