import type { Algorithm, RemoteEncoding } from './algorithm.ts';

/**
 * `permitLimit` permits per window; windows restart at exact multiples of `window` from t = 0.
 * State: `[windowStart, count]`. With `carry`, a count over the limit when a window ends (a settled lease that
 * cost more than what was left) is debt: the next windows start with it, each paying up to `limit`.
 */
export class FixedWindow implements Algorithm {
  readonly kind = 'fixed-window';
  readonly width = 2;
  readonly timeBased = true;
  readonly signature: string;
  readonly remote: RemoteEncoding;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    /** Whether a count over the limit carries into the next windows (false when rejected requests are counted). */
    readonly carry = true,
  ) {
    this.signature = `fw:${limit}:${windowMs}`;
    this.remote = { twin: 'fw', params: [windowMs] };
  }

  init(s: Float64Array, o: number, now: number): void {
    s[o] = now;
    s[o + 1] = 0;
  }

  advance(s: Float64Array, o: number, now: number): void {
    // Every decision runs this line; the new window, once a window, is out of line (the inlining budget).
    if (now - s[o] >= this.windowMs) this.roll(s, o, now);
  }

  /** {@link advance} past the end of the current window. */
  private roll(s: Float64Array, o: number, now: number): void {
    const start = s[o];
    // Whole windows only, so boundaries stay at exact multiples however long the partition was idle.
    const windows = Math.floor((now - start) / this.windowMs);
    s[o] = start + windows * this.windowMs;
    // Only a settle can leave a count over the limit (carry is off when penalties can): each window pays `limit`.
    const debt = s[o + 1] - windows * this.limit;
    s[o + 1] = this.carry && debt > 0 ? debt : 0;
  }

  available(s: Float64Array, o: number): number {
    return this.limit - s[o + 1];
  }

  take(s: Float64Array, o: number, n: number): void {
    s[o + 1] += n;
  }

  give(s: Float64Array, o: number, n: number): void {
    s[o + 1] -= n;
  }

  mark(s: Float64Array, o: number): number {
    return s[o];
  }

  refund(s: Float64Array, o: number, n: number, mark: number): void {
    // A later window owes nothing to a request of an earlier one.
    if (s[o] !== mark) return;
    s[o + 1] = Math.max(0, s[o + 1] - n);
  }

  retryAfter(s: Float64Array, o: number, now: number, n: number): number {
    const count = s[o + 1];
    if (this.limit - count >= n) return 0;
    // After k window ends the count is max(0, count − k·limit) with debt carried: the first k that leaves room.
    const k =
      count > this.limit && this.carry ? Math.max(1, Math.ceil((count + n - this.limit) / this.limit)) : 1;
    return s[o] + k * this.windowMs - now;
  }

  resetAfter(s: Float64Array, o: number, now: number): number {
    const count = s[o + 1];
    // In debt, the time to full is out of line: this runs on every grant, and its size decides what V8 inlines.
    return count === 0 ? 0 : count > this.limit ? this.debtReset(s, o, now) : s[o] + this.windowMs - now;
  }

  /** {@link resetAfter} with the count over the limit: each further window pays `limit` of the debt. */
  private debtReset(s: Float64Array, o: number, now: number): number {
    const k = this.carry ? Math.ceil(s[o + 1] / this.limit) : 1;
    return s[o] + k * this.windowMs - now;
  }

  /**
   * Counts stay: a lowered limit takes back nothing already granted; but no debt is carried past a count the new
   * limit would never have let in (the count is capped at it).
   */
  retuned(s: Float64Array, o: number): void {
    if (this.carry && s[o + 1] > this.limit) s[o + 1] = this.limit;
  }

  isFull(s: Float64Array, o: number): boolean {
    return s[o + 1] <= 0;
  }
}
