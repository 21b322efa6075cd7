import { describe, parseDuration } from '../duration.ts';
import type { Clock, QueueOrder } from './core.ts';

/** Options every queueing limiter shares. */
export interface QueueOptions {
  /** Permits (not requests) that may wait for a grant. Default 0: reject at once. */
  queueLimit?: number;
  /** Which waiter is served first. Default `'oldest-first'`. */
  queueOrder?: QueueOrder;
}

/** The names of {@link QueueOptions}, for the limiters' lists of known option names. */
export const QUEUE_OPTION_NAMES = [
  'queueLimit',
  'queueOrder',
] as const satisfies readonly (keyof QueueOptions)[];

/** Options every time-based limiter shares. */
export interface TimeOptions extends QueueOptions {
  /** Count rejected requests against the budget (the "penalty" of most Node libraries). Default false. */
  countRejected?: boolean;
  /** The clock, in milliseconds, monotonic. Default `performance.now()`. */
  clock?: Clock;
  /**
   * What one permit is: `'requests'` (default), or a cost unit — `'tokens'`, `'bytes'` … — for a limiter whose
   * grants are asked with an estimate and settled at the real cost (`lease.settle`). In a chain that has a cost
   * member, a member counting requests takes one permit per request whatever the estimate, and is never settled.
   */
  unit?: string;
  /**
   * Whether one request may ask for more than the limit (an estimate bigger than the whole budget). Default
   * false: such a request is a `RangeError`. With `true` it is granted when the limiter has its whole capacity
   * free — a window with nothing counted, a full bucket — and nobody it must not pass is waiting; what it takes
   * beyond the limit is debt, paid from the next capacity as a settle's overdraw is.
   */
  overdraw?: boolean;
}

/** The names of {@link TimeOptions}. */
export const TIME_OPTION_NAMES = [
  ...QUEUE_OPTION_NAMES,
  'countRejected',
  'clock',
  'unit',
  'overdraw',
] as const satisfies readonly (keyof TimeOptions)[];

/**
 * `globalThis.performance`, read once: in Node the global is a lazy getter, and looking it up on every decision
 * cost ~150 instructions of the ~400 a clock read took (callgrind, Node 20, December 2026).
 */
const perf = globalThis.performance;

/**
 * The default clock: `performance.now()`, monotonic. Read afresh on every decision: caching a reading for the
 * rest of the microtask turn saved ~100 ns per decision in tight loops, but cost a queued microtask (~0.5 µs on a
 * server, where every request is a turn of its own and decides once).
 */
export const performanceClock: Clock = { now: perf.now.bind(perf) };

/** A whole number ≥ `min`, or a TypeError/RangeError naming `name` and the value. */
export function integer(name: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number')
    throw new TypeError(`${name} must be a whole number; got ${describe(value)}`);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(
      `${name} must be a whole number ${max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`}; got ${describe(value)}`,
    );
  }
  return value;
}

/** A duration in milliseconds (number or `'10s'`-style string). */
export function duration(name: string, value: unknown): number {
  return parseDuration(name, value);
}

/** One of `choices`, or a TypeError naming `name` and the value. */
export function oneOf<T extends string>(name: string, value: unknown, choices: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!choices.includes(value as T)) {
    throw new TypeError(
      `${name} must be one of ${choices.map((c) => `'${c}'`).join(', ')}; got ${describe(value)}`,
    );
  }
  return value as T;
}

/** The options object itself must be an object. */
export function object<T>(name: string, value: T): T {
  if (value === null || typeof value !== 'object')
    throw new TypeError(`${name} must be an object; got ${describe(value)}`);
  return value;
}

/** Validates the queue and clock options shared by every limiter. */
export function queueAndClock(
  kind: string,
  options: TimeOptions,
): {
  queueLimit: number;
  queueOrder: QueueOrder;
  countRejected: boolean;
  clock: Clock;
  unit?: string;
  overdraw?: true;
} {
  const queueLimit =
    options.queueLimit === undefined ? 0 : integer(`${kind}: queueLimit`, options.queueLimit, 0);
  const queueOrder = oneOf(
    `${kind}: queueOrder`,
    options.queueOrder,
    ['oldest-first', 'newest-first'],
    'oldest-first',
  );
  if (options.countRejected !== undefined && typeof options.countRejected !== 'boolean') {
    throw new TypeError(`${kind}: countRejected must be a boolean; got ${describe(options.countRejected)}`);
  }
  const clock = options.clock ?? performanceClock;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') {
    throw new TypeError(
      `${kind}: clock must be an object with a now() method; got ${describe(options.clock)}`,
    );
  }
  const unit = options.unit;
  if (unit !== undefined && (typeof unit !== 'string' || !UNIT.test(unit))) {
    throw new TypeError(
      `${kind}: unit must be a word of letters, digits and '-' ('requests', 'tokens', 'input-tokens'…); got ${describe(unit)}`,
    );
  }
  if (options.overdraw !== undefined && typeof options.overdraw !== 'boolean') {
    throw new TypeError(`${kind}: overdraw must be a boolean; got ${describe(options.overdraw)}`);
  }
  const countRejected = options.countRejected === true;
  const core: ReturnType<typeof queueAndClock> = { queueLimit, queueOrder, countRejected, clock };
  if (unit !== undefined && unit !== 'requests') core.unit = unit;
  // Only when on: every other limiter's options (and signature) stay as they were.
  if (options.overdraw === true) core.overdraw = true;
  return core;
}

/** A unit's name: it becomes a quota's name in response header fields. */
const UNIT = /^[A-Za-z][A-Za-z0-9-]{0,31}$/;

/**
 * Checks the permits of one request against the limit: a programming error is a RangeError — an
 * {@link OverLimitError} when a whole number above the limit of a limiter that does not allow `overdraw`.
 */
export function checkPermits(permits: number, limit: number, overdraw?: boolean, source?: object): void {
  if (!Number.isInteger(permits) || permits < 0 || permits > limit) {
    if (typeof permits !== 'number')
      throw new TypeError(`permits must be a whole number; got ${describe(permits)}`);
    if (Number.isInteger(permits) && permits > limit) {
      if (overdraw === true) return;
      throw new OverLimitError(permits, limit, source);
    }
    throw new RangeError(
      `permits must be a whole number from 0 to the limit (${limit}); got ${describe(permits)}`,
    );
  }
}

/**
 * One request asked for more permits than a limiter's limit, which does not allow `overdraw`: it could never be
 * granted. A `RangeError` (a programming error for a direct call); the HTTP layer answers a route's cost estimate
 * that meets it with a rejection (`'too-large'`, status 413), and `rateLimitedFetch` rejects the call at once.
 */
export class OverLimitError extends RangeError {
  constructor(
    /** The permits asked. */
    readonly permits: number,
    /** The limit they exceed. */
    readonly limit: number,
    /** The limiter whose limit it is, when known (a lease's `source`). */
    readonly source?: object,
  ) {
    super(
      `permits must be a whole number from 0 to the limit (${limit}); got ${permits} (a limiter with overdraw: true grants more when its whole capacity is free)`,
    );
  }
}
