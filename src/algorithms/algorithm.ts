/**
 * A rate-limiting algorithm: a decision over compact numeric state, stored in `width` consecutive numbers of a
 * `Float64Array` starting at offset `o`. Nothing here reads a clock, sets a timer or allocates; time is brought
 * forward lazily by {@link Algorithm.advance} when a decision is asked, from the stamps kept in the state.
 *
 * Every method but `init` and `advance` expects the state to have been advanced to `now` first.
 */
export interface Algorithm {
  /** `'fixed-window' | 'sliding-window' | 'token-bucket' | 'concurrency'`. */
  readonly kind: string;
  /** Numbers of state per partition. */
  readonly width: number;
  /** The most permits one request may ask for. */
  readonly limit: number;
  /** Whether permits come back with time (false: only by release). */
  readonly timeBased: boolean;
  /** The length of the window or period, for response headers; undefined for concurrency. */
  readonly windowMs: number | undefined;
  /** Writes a fresh state, anchored at `now` (t = 0 of this partition). */
  init(s: Float64Array, o: number, now: number): void;
  /** Brings the state forward to `now`. Never changes a decision; may be called any number of times. */
  advance(s: Float64Array, o: number, now: number): void;
  /** Permits available now (may be negative after penalties). */
  available(s: Float64Array, o: number): number;
  /** Consumes `n` permits (may go past zero when rejected requests are counted). */
  take(s: Float64Array, o: number, n: number): void;
  /** Gives back `n` permits taken now (a rollback, or a concurrency release). */
  give(s: Float64Array, o: number, n: number): void;
  /**
   * Where permits taken now come back to when refunded: the window (or segment) start; 0 when it does not matter
   * (token bucket) or permits come back by release (concurrency).
   */
  mark(s: Float64Array, o: number): number;
  /**
   * Gives back `n` permits taken at `mark` (a refund, Go's `Reservation.Cancel`): into the window or segment they
   * came from while it is still current or in the window, never into a later one, never above the limit.
   */
  refund(s: Float64Array, o: number, n: number, mark: number): void;
  /**
   * How far apart the marks of consecutive segments are (a sliding window's segment length), so permits can be
   * given back into older segments too; undefined when a state has one mark.
   */
  readonly markStep?: number;
  /** Milliseconds until `n` permits could be available, ignoring later arrivals; 0 when they are; NaN if unknown. */
  retryAfter(s: Float64Array, o: number, now: number, n: number): number;
  /** Milliseconds until the state is back to full; 0 when it is; NaN if unknown. */
  resetAfter(s: Float64Array, o: number, now: number): number;
  /**
   * Makes a state written under other parameters of this kind (already advanced to now under them) valid under
   * these: `setLimit` changes parameters at run time. A bucket keeps no more tokens than its new limit; counts
   * and held permits stay as they are (a lowered limit takes nothing back).
   */
  retuned(s: Float64Array, o: number): void;
  /** Whether the state is equivalent to a fresh one (so the partition can be dropped). */
  isFull(s: Float64Array, o: number): boolean;
  /**
   * Milliseconds left on a lockout the algorithm keeps itself (`lockout()`), 0 when not locked out; absent for
   * an algorithm that never locks. What key administration reports as a key's `lockedForMs`.
   */
  lockedFor?(s: Float64Array, o: number, now: number): number;
  /**
   * Lifts that lockout and forgets the failures and growth behind it (an administrator's `unlock`: the user
   * starts over); absent for an algorithm that never locks.
   */
  unlock?(s: Float64Array, o: number, now: number): void;
  /** A string that identifies the parameters: two algorithms with equal signatures decide alike. */
  readonly signature: string;
  /**
   * How a remote store runs it: which of the store's scripted twins decides, with what parameters. Only
   * floodgate's fixed window, sliding window, token bucket and concurrency have one; an algorithm without it (a
   * user's own, or adaptive concurrency, whose limit is learnt in one process) runs in memory only, and the Redis
   * store refuses it when the limiter is made.
   */
  readonly remote?: RemoteEncoding;
  /**
   * With priority classes (`concurrency({ classes })`): the most permits a request of class `rank` may find held
   * after its grant, which a remote store sends with the request. Absent: every class may use the whole limit.
   */
  ceiling?(rank: number): number;
}

/** An algorithm as a remote store's script decides it (see {@link Algorithm.remote}). */
export interface RemoteEncoding {
  /** The twin: fixed window, sliding window, stepped or continuous token bucket, concurrency, lockout. */
  readonly twin: 'fw' | 'sw' | 'tb' | 'tc' | 'cc' | 'lo';
  /**
   * Its parameters after `limit`, in order: window; window, segments; tokens per period, period; none; within,
   * lockFor, factor, maxLockFor, memory.
   */
  readonly params: readonly number[];
}
