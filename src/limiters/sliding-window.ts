import { SlidingWindow } from '../algorithms/sliding-window.ts';
import type { Duration } from '../duration.ts';
import { describe } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import { duration, integer, object, queueAndClock, TIME_OPTION_NAMES, type TimeOptions } from './options.ts';
import { RateLimiter } from './rate-limiter.ts';

/** Options of {@link slidingWindow}. */
export interface SlidingWindowOptions extends TimeOptions {
  /** Permits in any window. */
  permitLimit: number;
  /** The window length. */
  window: Duration;
  /** Segments the window is cut into (1 to 1000); more is smoother and costs 8 bytes each per partition. */
  segmentsPerWindow: number;
}

/** Every option name of {@link SlidingWindowOptions}: any other is refused. */
export const SLIDING_WINDOW_OPTION_NAMES = [
  ...TIME_OPTION_NAMES,
  'permitLimit',
  'window',
  'segmentsPerWindow',
] as const satisfies readonly (keyof SlidingWindowOptions)[];

/**
 * `permitLimit` permits in any window of `window`, cut into `segmentsPerWindow` segments: permits taken in a
 * segment come back one full window after that segment began.
 */
export class SlidingWindowLimiter extends RateLimiter {
  declare readonly algorithm: SlidingWindow;

  constructor(options: SlidingWindowOptions) {
    object('slidingWindow options', options);
    rejectUnknown('slidingWindow', options, SLIDING_WINDOW_OPTION_NAMES);
    const permitLimit = integer('slidingWindow: permitLimit', options.permitLimit, 1);
    const window = duration('slidingWindow: window', options.window);
    const segments = integer('slidingWindow: segmentsPerWindow', options.segmentsPerWindow, 1, 1000);
    if (window / segments < 1) {
      throw new RangeError(
        `slidingWindow: segmentsPerWindow (${segments}) makes segments shorter than 1 ms for window ${describe(options.window)}`,
      );
    }
    super(new SlidingWindow(permitLimit, window, segments), queueAndClock('slidingWindow', options));
  }

  /**
   * Changes `permitLimit` from now on, here and in every partition built from this limiter. Permits taken in the
   * window so far stay counted and come back when their segment leaves it; raised, the difference is available
   * at once and waiters are served. A waiter asking for more than the new limit is rejected (`'limit'`).
   */
  setLimit(permitLimit: number): void {
    const limit = integer('slidingWindow.setLimit: permitLimit', permitLimit, 1);
    const a = this.algorithm;
    this.retune('slidingWindow.setLimit', new SlidingWindow(limit, a.windowMs, a.segments));
  }
}

/** A sliding-window limiter. See {@link SlidingWindowLimiter}. */
export function slidingWindow(options: SlidingWindowOptions): SlidingWindowLimiter {
  return new SlidingWindowLimiter(options);
}
