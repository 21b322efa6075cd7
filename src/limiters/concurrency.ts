import { Concurrency } from '../algorithms/concurrency.ts';
import { rejectUnknown } from '../options/known.ts';
import type { Clock } from './core.ts';
import { integer, object, QUEUE_OPTION_NAMES, type QueueOptions, queueAndClock } from './options.ts';
import { RateLimiter } from './rate-limiter.ts';

/** Options of {@link concurrency}. */
export interface ConcurrencyOptions extends QueueOptions {
  /** Permits that may be held at once. */
  permitLimit: number;
  /** Used only to time queue waits. Default `performance.now()`. */
  clock?: Clock;
}

/** Every option name of {@link ConcurrencyOptions}: any other is refused. */
export const CONCURRENCY_OPTION_NAMES = [
  ...QUEUE_OPTION_NAMES,
  'permitLimit',
  'clock',
] as const satisfies readonly (keyof ConcurrencyOptions)[];

/**
 * At most `permitLimit` permits held at once. A permit comes back when its lease is released (`release()` is
 * idempotent), which serves the queue. A rejected lease has no `retryAfterMs`: nothing tells when a holder ends.
 */
export class ConcurrencyLimiter extends RateLimiter {
  constructor(options: ConcurrencyOptions) {
    object('concurrency options', options);
    const permitLimit = integer('concurrency: permitLimit', options.permitLimit, 1);
    if ((options as { countRejected?: unknown }).countRejected !== undefined) {
      throw new TypeError('concurrency: countRejected does not apply to a concurrency limiter');
    }
    rejectUnknown('concurrency', options, CONCURRENCY_OPTION_NAMES);
    super(new Concurrency(permitLimit), queueAndClock('concurrency', options));
  }

  /**
   * Changes `permitLimit` from now on, here and in every partition built from this limiter. Raised, waiters
   * that now fit are admitted at once, in queue order. Lowered, no lease is taken back: permits held above the
   * new limit drain as they are released, and nothing is granted until fewer than it are held. A waiter asking
   * for more than the new limit is rejected (`'limit'`). A `RangeError`, as at construction, for a bad value.
   */
  setLimit(permitLimit: number): void {
    this.retune(
      'concurrency.setLimit',
      new Concurrency(integer('concurrency.setLimit: permitLimit', permitLimit, 1)),
    );
  }
}

/** A concurrency limiter. See {@link ConcurrencyLimiter}. */
export function concurrency(options: ConcurrencyOptions): ConcurrencyLimiter {
  return new ConcurrencyLimiter(options);
}
