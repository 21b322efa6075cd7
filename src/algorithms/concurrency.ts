import type { Algorithm, RemoteEncoding } from './algorithm.ts';
import type { PriorityClasses } from './priority-classes.ts';

/** At most `permitLimit` permits held at once; a permit comes back only when its lease is released. State: `[held]`. */
export class Concurrency implements Algorithm {
  readonly kind = 'concurrency';
  readonly width = 1;
  readonly timeBased = false;
  readonly windowMs = undefined;
  readonly signature: string;
  readonly remote: RemoteEncoding = { twin: 'cc', params: [] };

  constructor(
    readonly limit: number,
    /** Shares of the limit reserved for higher classes (`concurrency({ classes })`), or undefined: none. */
    readonly classes?: PriorityClasses,
  ) {
    this.signature = classes === undefined ? `cc:${limit}` : `cc:${limit}:${classes.text}`;
  }

  ceiling(rank: number): number {
    return this.classes === undefined ? this.limit : this.classes.ceiling(rank, this.limit);
  }

  init(s: Float64Array, o: number): void {
    s[o] = 0;
  }

  advance(): void {}

  available(s: Float64Array, o: number): number {
    return this.limit - s[o];
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
    return this.limit - s[o] >= n ? 0 : Number.NaN;
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
