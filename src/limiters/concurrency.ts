import { Concurrency } from '../algorithms/concurrency.ts';
import { PriorityClasses } from '../algorithms/priority-classes.ts';
import { rejectUnknown } from '../options/known.ts';
import { ClassedCore } from './classed-core.ts';
import { type Clock, LimiterCore } from './core.ts';
import { integer, object, QUEUE_OPTION_NAMES, type QueueOptions, queueAndClock } from './options.ts';
import { RateLimiter } from './rate-limiter.ts';

/** Options of {@link concurrency}. */
export interface ConcurrencyOptions extends QueueOptions {
  /** Permits that may be held at once. */
  permitLimit: number;
  /**
   * Priority classes: a share of the limit reserved per class, e.g. `{ reserve: { critical: 0.2 } }` keeps the
   * top 20 % of `permitLimit` for critical requests (default and sheddable ones are granted up to 80 % of it).
   * Each request says its class (`tryAcquire(permits, priority)`, `acquire(permits, { priority })`, an HTTP
   * policy's `priority` hook). On a Redis store the shares hold across every process using the limiter.
   */
  classes?: {
    reserve?: Partial<Record<'critical' | 'default' | 'sheddable', number>> & Record<string, number>;
  };
  /** Used only to time queue waits. Default `performance.now()`. */
  clock?: Clock;
}

/** Every option name of {@link ConcurrencyOptions}: any other is refused. */
export const CONCURRENCY_OPTION_NAMES = [
  ...QUEUE_OPTION_NAMES,
  'permitLimit',
  'classes',
  'clock',
] as const satisfies readonly (keyof ConcurrencyOptions)[];

/**
 * At most `permitLimit` permits held at once. A permit comes back when its lease is released (`release()` is
 * idempotent), which serves the queue. A rejected lease has no `retryAfterMs`: nothing tells when a holder ends.
 */
export class ConcurrencyLimiter extends RateLimiter {
  declare readonly algorithm: Concurrency;

  constructor(options: ConcurrencyOptions) {
    object('concurrency options', options);
    const permitLimit = integer('concurrency: permitLimit', options.permitLimit, 1);
    if ((options as { countRejected?: unknown }).countRejected !== undefined) {
      throw new TypeError('concurrency: countRejected does not apply to a concurrency limiter');
    }
    rejectUnknown('concurrency', options, CONCURRENCY_OPTION_NAMES);
    const classes = classesOf(options.classes);
    const algorithm = new Concurrency(permitLimit, classes);
    const core = queueAndClock('concurrency', options);
    super(algorithm, core, classes === undefined ? undefined : new ClassedCore(algorithm, core));
  }

  /** @internal Each partition of a partitioned limiter keeps the classes' shares of its own limit. */
  createCore(): LimiterCore {
    const algorithm = this.algorithm;
    if (algorithm.classes === undefined) return new LimiterCore(algorithm, this.options);
    return new ClassedCore(algorithm, this.options);
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
      new Concurrency(integer('concurrency.setLimit: permitLimit', permitLimit, 1), this.algorithm.classes),
    );
  }
}

/** A concurrency limiter. See {@link ConcurrencyLimiter}. */
export function concurrency(options: ConcurrencyOptions): ConcurrencyLimiter {
  return new ConcurrencyLimiter(options);
}

/** The validated `classes` option: undefined when it reserves nothing (the plain core decides). */
function classesOf(classes: ConcurrencyOptions['classes']): PriorityClasses | undefined {
  if (classes === undefined) return undefined;
  object('concurrency: classes', classes);
  rejectUnknown('concurrency: classes', classes, ['reserve']);
  const parsed = new PriorityClasses('concurrency: classes', classes.reserve);
  return parsed.reserves ? parsed : undefined;
}
