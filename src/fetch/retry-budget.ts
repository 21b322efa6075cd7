import type { Clock } from '../limiters/core.ts';
import { KeyedCounts } from './keyed-counts.ts';

/** Settings of a {@link RetryBudget}. */
export interface RetryBudgetOptions {
  /** Retries allowed per call made, over the window. */
  ratio: number;
  /** Retries allowed over the window whatever the traffic, so that a quiet client can still retry. */
  minRetries: number;
  windowMs: number;
  buckets: number;
  maxEntries: number;
  clock: Clock;
}

/**
 * Retries as a fraction of recent calls, per partition (Finagle's `RetryBudget`, Envoy's retry budgets): over
 * the last `windowMs`, retries stay at or under `minRetries + ratio × calls`. When a dependency fails every
 * call, retries add at most that fraction to its load instead of multiplying it by the attempts.
 */
export class RetryBudget {
  private readonly histories: KeyedCounts;

  constructor(readonly options: RetryBudgetOptions) {
    this.histories = new KeyedCounts({
      windowMs: options.windowMs,
      buckets: options.buckets,
      maxEntries: options.maxEntries,
      clock: options.clock,
    });
  }

  /** Counts a call made by the application (not a retry). */
  call(key: string): void {
    this.histories.get(key).add(this.options.clock.now(), 1, 0);
  }

  /** Whether one more retry of a call to `key` fits in the budget; if it does, it is spent. */
  tryRetry(key: string): boolean {
    const history = this.histories.get(key);
    const now = this.options.clock.now();
    const allowed = this.options.minRetries + this.options.ratio * history.total(now);
    if (history.marked(now) + 1 > allowed) return false;
    history.add(now, 0, 1);
    return true;
  }

  /** Retries left for `key` in the window now. */
  remaining(key: string): number {
    const history = this.histories.peek(key);
    const { minRetries, ratio, clock } = this.options;
    if (history === undefined) return minRetries;
    const now = clock.now();
    return Math.max(0, Math.floor(minRetries + ratio * history.total(now) - history.marked(now)));
  }
}
