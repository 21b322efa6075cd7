import { FixedWindow } from '../algorithms/fixed-window.ts';
import type { Duration } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import { duration, integer, object, queueAndClock, TIME_OPTION_NAMES, type TimeOptions } from './options.ts';
import { RateLimiter } from './rate-limiter.ts';

/** Options of {@link fixedWindow}. */
export interface FixedWindowOptions extends TimeOptions {
  /** Permits per window. */
  permitLimit: number;
  /** The window length. */
  window: Duration;
}

/** Every option name of {@link FixedWindowOptions}: any other is refused. */
export const FIXED_WINDOW_OPTION_NAMES = [
  ...TIME_OPTION_NAMES,
  'permitLimit',
  'window',
] as const satisfies readonly (keyof FixedWindowOptions)[];

/**
 * `permitLimit` permits per window; the window restarts at exact multiples of `window` from the limiter's
 * creation. A burst at the end of one window and the start of the next can pass `2 × permitLimit` in a short
 * time: that is the algorithm.
 */
export class FixedWindowLimiter extends RateLimiter {
  declare readonly algorithm: FixedWindow;

  constructor(options: FixedWindowOptions) {
    object('fixedWindow options', options);
    rejectUnknown('fixedWindow', options, FIXED_WINDOW_OPTION_NAMES);
    const permitLimit = integer('fixedWindow: permitLimit', options.permitLimit, 1);
    const window = duration('fixedWindow: window', options.window);
    const core = queueAndClock('fixedWindow', options);
    super(new FixedWindow(permitLimit, window, !core.countRejected), core);
  }

  /**
   * Changes `permitLimit` from now on, here and in every partition built from this limiter. Permits already
   * counted in the current window stay counted: lowered below them, nothing more is granted until the next
   * window; raised, the difference is available at once and waiters are served. A waiter asking for more than
   * the new limit is rejected (`'limit'`). A `RangeError`, as at construction, for a bad value.
   */
  setLimit(permitLimit: number): void {
    const limit = integer('fixedWindow.setLimit: permitLimit', permitLimit, 1);
    this.retune(
      'fixedWindow.setLimit',
      new FixedWindow(limit, this.algorithm.windowMs, this.algorithm.carry),
    );
  }
}

/** A fixed-window limiter. See {@link FixedWindowLimiter}. */
export function fixedWindow(options: FixedWindowOptions): FixedWindowLimiter {
  return new FixedWindowLimiter(options);
}
