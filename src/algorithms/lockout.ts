import type { Algorithm, RemoteEncoding } from './algorithm.ts';

// The state's numbers, by offset.
const FAILURES = 0;
const WINDOW_END = 1;
const LOCKED_UNTIL = 2;
const STREAK = 3;
const STAMP = 4;

/**
 * A lockout: after `failures` failures within `withinMs` of the first, the key is locked out for `lockForMs`;
 * each further lockout that starts within `memoryMs` of the end of the last one lasts `factor` times longer, up
 * to `maxLockForMs`. A request is counted as a failure when it is granted; a refund (a success, as the route
 * defines it) clears the failures and the growth, and lifts the lockout the refunded request itself started.
 *
 * State: `[failures, windowEnd, lockedUntil, streak, stamp]` — failures counted since the first of the window;
 * when that window ends; when the current or last lockout ends (growth is counted from it); how many lockouts
 * the current growth has seen (0: none remembered); the time the state was last advanced to (so `take` knows
 * when a lockout starts).
 */
export class Lockout implements Algorithm {
  readonly kind = 'lockout';
  readonly width = 5;
  readonly timeBased = true;
  readonly signature: string;
  readonly remote: RemoteEncoding;

  constructor(
    /** Failures that lock the key out (the limit its header fields show). */
    readonly limit: number,
    /** The window failures are counted in, from the first. */
    readonly withinMs: number,
    /** The first lockout. */
    readonly lockForMs: number,
    /** How much longer each further lockout within `memoryMs` lasts. */
    readonly factor: number,
    /** The longest lockout. */
    readonly maxLockForMs: number,
    /** How long after a lockout ends the next one still grows. */
    readonly memoryMs: number,
  ) {
    this.signature = `lo:${limit}:${withinMs}:${lockForMs}:${factor}:${maxLockForMs}:${memoryMs}`;
    this.remote = { twin: 'lo', params: [withinMs, lockForMs, factor, maxLockForMs, memoryMs] };
  }

  /** The window failures are counted in (`w` of the header fields). */
  get windowMs(): number {
    return this.withinMs;
  }

  /** How long the `streak`-th lockout of a growth lasts. */
  durationOf(streak: number): number {
    return Math.min(this.lockForMs * this.factor ** (streak - 1), this.maxLockForMs);
  }

  init(s: Float64Array, o: number, now: number): void {
    s[o + FAILURES] = 0;
    s[o + WINDOW_END] = now;
    // Never locked: any time from 0 on is past it (0 rather than -Infinity, which Redis's twin packs alike).
    s[o + LOCKED_UNTIL] = 0;
    s[o + STREAK] = 0;
    s[o + STAMP] = now;
  }

  advance(s: Float64Array, o: number, now: number): void {
    if (now > s[o + STAMP]) s[o + STAMP] = now;
    const stamp = s[o + STAMP];
    if (s[o + FAILURES] > 0 && stamp >= s[o + WINDOW_END]) s[o + FAILURES] = 0;
    // The memory period counts from the end of the last lockout: past it, the next lockout starts over.
    if (s[o + STREAK] > 0 && stamp >= s[o + LOCKED_UNTIL] + this.memoryMs) s[o + STREAK] = 0;
  }

  /** Whether the key is locked out (the state advanced to now). */
  locked(s: Float64Array, o: number): boolean {
    return s[o + LOCKED_UNTIL] > s[o + STAMP];
  }

  available(s: Float64Array, o: number): number {
    return this.locked(s, o) ? 0 : this.limit - s[o + FAILURES];
  }

  take(s: Float64Array, o: number, n: number): void {
    const now = s[o + STAMP];
    if (s[o + FAILURES] === 0) s[o + WINDOW_END] = now + this.withinMs;
    s[o + FAILURES] += n;
    if (s[o + FAILURES] < this.limit) return;
    // The Nth failure: the lockout starts now, and failures are counted afresh after it.
    const streak = s[o + STREAK] + 1;
    s[o + STREAK] = streak;
    s[o + LOCKED_UNTIL] = now + this.durationOf(streak);
    s[o + FAILURES] = 0;
  }

  give(s: Float64Array, o: number, n: number): void {
    s[o + FAILURES] = Math.max(0, s[o + FAILURES] - n);
  }

  /** The end of the lockout this grant started (the request that was the Nth failure); NaN for any other. */
  mark(s: Float64Array, o: number): number {
    return s[o + FAILURES] === 0 && this.locked(s, o) ? s[o + LOCKED_UNTIL] : Number.NaN;
  }

  /**
   * A success: the failures and the growth are cleared, and the lockout is lifted if this request started it
   * (it was the Nth attempt and turned out right). A lockout another request started stands.
   */
  refund(s: Float64Array, o: number, _n: number, mark: number): void {
    s[o + FAILURES] = 0;
    s[o + STREAK] = 0;
    if (mark === s[o + LOCKED_UNTIL] && this.locked(s, o)) s[o + LOCKED_UNTIL] = s[o + STAMP];
  }

  retryAfter(s: Float64Array, o: number, now: number, n: number): number {
    const until = s[o + LOCKED_UNTIL];
    if (until > now) return until - now;
    return this.limit - s[o + FAILURES] >= n ? 0 : s[o + WINDOW_END] - now;
  }

  resetAfter(s: Float64Array, o: number, now: number): number {
    const until = s[o + LOCKED_UNTIL];
    if (until > now) return until - now;
    return s[o + FAILURES] === 0 ? 0 : s[o + WINDOW_END] - now;
  }

  /** Milliseconds left on the lockout, 0 when not locked out (the state advanced to `now`). */
  lockedFor(s: Float64Array, o: number, now: number): number {
    return Math.max(0, s[o + LOCKED_UNTIL] - now);
  }

  /** Lifts the lockout and clears the failures and the growth (an administrator's `unlock`: the user starts over). */
  unlock(s: Float64Array, o: number, now: number): void {
    if (s[o + LOCKED_UNTIL] > now) s[o + LOCKED_UNTIL] = now;
    s[o + FAILURES] = 0;
    s[o + STREAK] = 0;
  }

  retuned(): void {}

  isFull(s: Float64Array, o: number): boolean {
    // Growth remembered keeps the partition: dropping it would make the next lockout short again.
    return s[o + FAILURES] === 0 && s[o + STREAK] === 0 && !this.locked(s, o);
  }
}
