import type { Algorithm, RemoteEncoding } from './algorithm.ts';

/**
 * `permitLimit` permits per window; windows restart at exact multiples of `window` from t = 0.
 * State: `[windowStart, count]`.
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
  ) {
    this.signature = `fw:${limit}:${windowMs}`;
    this.remote = { twin: 'fw', params: [windowMs] };
  }

  init(s: Float64Array, o: number, now: number): void {
    s[o] = now;
    s[o + 1] = 0;
  }

  advance(s: Float64Array, o: number, now: number): void {
    const start = s[o];
    if (now - start >= this.windowMs) {
      // Whole windows only, so boundaries stay at exact multiples however long the partition was idle.
      s[o] = start + Math.floor((now - start) / this.windowMs) * this.windowMs;
      s[o + 1] = 0;
    }
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
    return this.limit - s[o + 1] >= n ? 0 : s[o] + this.windowMs - now;
  }

  resetAfter(s: Float64Array, o: number, now: number): number {
    return s[o + 1] === 0 ? 0 : s[o] + this.windowMs - now;
  }

  /** Counts stay: a lowered limit takes back nothing already granted. */
  retuned(): void {}

  isFull(s: Float64Array, o: number): boolean {
    return s[o + 1] <= 0;
  }
}
