import type { Algorithm, RemoteEncoding } from './algorithm.ts';

/** How a token bucket refills: at period boundaries, or in proportion to elapsed time. */
export type Replenishment = 'stepped' | 'continuous';

// Continuous refill accumulates floating-point error; a token this close to whole counts as whole.
const EPSILON = 1e-9;

/**
 * A bucket of `tokenLimit` tokens, full at t = 0. `stepped` adds `tokensPerPeriod` at each exact period
 * boundary; `continuous` adds them in proportion to elapsed time (GCRA-equivalent). Never above the limit.
 * State: `[stamp, tokens]` — the last period boundary (stepped) or the last refill time (continuous).
 */
export class TokenBucket implements Algorithm {
  readonly kind = 'token-bucket';
  readonly width = 2;
  readonly timeBased = true;
  readonly signature: string;
  readonly remote: RemoteEncoding;
  private readonly continuous: boolean;
  private readonly ratePerMs: number;

  constructor(
    readonly limit: number,
    readonly tokensPerPeriod: number,
    readonly periodMs: number,
    readonly replenishment: Replenishment,
  ) {
    this.continuous = replenishment === 'continuous';
    this.ratePerMs = tokensPerPeriod / periodMs;
    this.signature = `tb:${limit}:${tokensPerPeriod}:${periodMs}:${replenishment}`;
    this.remote = { twin: this.continuous ? 'tc' : 'tb', params: [tokensPerPeriod, periodMs] };
  }

  get windowMs(): number {
    // The time a drained bucket takes to refill: the window of the equivalent quota policy.
    return Math.ceil(this.limit / this.tokensPerPeriod) * this.periodMs;
  }

  init(s: Float64Array, o: number, now: number): void {
    s[o] = now;
    s[o + 1] = this.limit;
  }

  advance(s: Float64Array, o: number, now: number): void {
    const stamp = s[o];
    const elapsed = now - stamp;
    if (this.continuous) {
      if (elapsed <= 0) return;
      s[o] = now;
      const tokens = s[o + 1] + elapsed * this.ratePerMs;
      s[o + 1] = tokens >= this.limit - EPSILON ? this.limit : tokens;
      return;
    }
    if (elapsed < this.periodMs) return;
    const periods = Math.floor(elapsed / this.periodMs);
    s[o] = stamp + periods * this.periodMs;
    s[o + 1] = Math.min(this.limit, s[o + 1] + periods * this.tokensPerPeriod);
  }

  available(s: Float64Array, o: number): number {
    // Stepped buckets only ever hold whole tokens.
    return this.continuous ? Math.floor(s[o + 1] + EPSILON) : s[o + 1];
  }

  take(s: Float64Array, o: number, n: number): void {
    s[o + 1] -= n;
  }

  give(s: Float64Array, o: number, n: number): void {
    s[o + 1] += n;
  }

  mark(): number {
    return 0;
  }

  refund(s: Float64Array, o: number, n: number): void {
    // Tokens refilled since make up for the taken ones: the bucket never holds more than its limit.
    s[o + 1] = Math.min(this.limit, s[o + 1] + n);
  }

  retryAfter(s: Float64Array, o: number, now: number, n: number): number {
    return this.timeUntil(s, o, now, n);
  }

  resetAfter(s: Float64Array, o: number, now: number): number {
    return this.timeUntil(s, o, now, this.limit);
  }

  private timeUntil(s: Float64Array, o: number, now: number, n: number): number {
    const missing = n - s[o + 1];
    if (missing <= EPSILON) return 0;
    if (this.continuous) return missing / this.ratePerMs;
    return s[o] + Math.ceil(missing / this.tokensPerPeriod) * this.periodMs - now;
  }

  /** Tokens above a lowered limit are gone; a raised limit adds none (they come with time, as in Go). */
  retuned(s: Float64Array, o: number): void {
    if (s[o + 1] > this.limit) s[o + 1] = this.limit;
  }

  isFull(s: Float64Array, o: number): boolean {
    return s[o + 1] >= this.limit;
  }
}
