import type { Algorithm } from './algorithm.ts';

/**
 * The permit count of an adaptive concurrency limiter: like {@link Concurrency}, but the limit is part of each
 * partition's state and changes at run time (written by the limiter as it learns). State: `[held, limit]`.
 * A limit lowered below `held` takes no lease back: nothing is granted until `held` falls under it.
 */
export class AdaptiveConcurrency implements Algorithm {
  readonly kind = 'concurrency';
  readonly width = 2;
  readonly timeBased = false;
  readonly windowMs = undefined;

  constructor(
    /** The limit a fresh partition starts with. */
    readonly initialLimit: number,
    /** The most permits one request may ask for: the largest the limit can become. */
    readonly limit: number,
    readonly signature: string,
  ) {}

  init(s: Float64Array, o: number): void {
    s[o] = 0;
    s[o + 1] = this.initialLimit;
  }

  advance(): void {}

  available(s: Float64Array, o: number): number {
    return s[o + 1] - s[o];
  }

  take(s: Float64Array, o: number, n: number): void {
    s[o] += n;
  }

  give(s: Float64Array, o: number, n: number): void {
    s[o] -= n;
  }

  mark(): number {
    return 0;
  }

  /** Concurrency permits come back by release, not refund. */
  refund(): void {}

  retryAfter(s: Float64Array, o: number, _now: number, n: number): number {
    return s[o + 1] - s[o] >= n ? 0 : Number.NaN;
  }

  resetAfter(s: Float64Array, o: number): number {
    return s[o] === 0 ? 0 : Number.NaN;
  }

  /** Counts stay: a lowered limit takes back nothing already granted. */
  retuned(): void {}

  isFull(s: Float64Array, o: number): boolean {
    return s[o] === 0;
  }
}
