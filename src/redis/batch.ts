/**
 * How long a batch should last at the demand this process saw: its size is the permits spent in the last
 * batch's time, scaled to this many milliseconds (and at most doubled per take, so one burst does not grab a
 * window).
 */
export const BATCH_TARGET_MS = 50;

/**
 * A token bucket's batch lives this long from its take (on this process's clock from when the take was sent;
 * Redis keeps the holder's record as long from when it ran the take): a crashed or frozen process's reserve
 * comes back to the fleet after it.
 */
export const BUCKET_HOLD_MS = 1000;

/**
 * The share of a token bucket's limit that all processes' batches may hold together (floored: a bucket of fewer
 * than 100 tokens leases no spare token, each take is its request's own). What a fleet admits over any span is
 * at most what the bucket allows plus this.
 */
export const BUCKET_RESERVE = 0.01;

/**
 * Permits this process took from Redis for one key of a leased limiter (`leases: true`), spent here without
 * Redis until the window (a sliding window's segment) they were taken in ends. Pure arithmetic on the clock
 * values it is given (the store's test clock or `performance.now()`): the engine sends and receives, this class
 * only decides, which is what `test/redis/lease-model.test.ts` drives through every interleaving.
 *
 * Why no window is over-admitted: Redis counted the whole batch in its window (segment) when it granted it, and
 * answered how long that window had left, `endMs`. The batch is void at `sentAt + endMs`, on this process's
 * clock from the moment the take was *sent*: the script ran after that, so this is never later than the
 * window's end on Redis, whatever the round trip or a pause of this process (SIGSTOP) took. A permit spent here
 * is spent inside the window that counted it; permits given back were never spent and never will be.
 */
export class Batch {
  /** Permits left to spend here. */
  permits = 0;
  /** Where Redis counted them: the start of their window (segment), as the script wrote it; '' for none. */
  mark = '';
  /** This process's clock when the batch is void (never after its window's end on Redis). */
  endsAt = Number.NEGATIVE_INFINITY;
  /** This process's clock when the key is back to full, as Redis answered at the take (RateLimit's reset). */
  resetAt = 0;
  /** Permits Redis had left for the fleet after the take (RateLimit's remaining, with `permits`). */
  fleet = 0;
  /** Rejected by Redis until then (this process's clock): decided here as rejected, with no call. */
  deniedUntil = Number.NEGATIVE_INFINITY;
  /** The permits the rejection was for: a request for another count asks Redis (its retry time differs). */
  deniedNeed = 0;
  /** The next batch's size. */
  size = 1;
  /** Permits spent since the last take, and when that take was sent: the demand that sizes the next one. */
  private spent = 0;
  private since = 0;
  /** Whether a permit was spent since the last `idle` check. */
  private busy = false;
  /** Whether the last take was refused (the demand since could not be served). */
  private refused = false;

  constructor(private readonly limit: number) {}

  /** Spends `n` permits now if the batch is live and holds them. */
  spend(n: number, now: number): boolean {
    if (now >= this.endsAt || this.permits < n) return false;
    this.permits -= n;
    this.spent += n;
    this.busy = true;
    return true;
  }

  /**
   * `n` permits of this key were decided on Redis rather than here (a chain's round trip): demand all the same,
   * which sizes the next take.
   */
  demanded(n: number): void {
    this.spent += n;
  }

  /** Whether `now` is inside a rejection Redis answered: decided here, rejected. */
  denied(now: number, n = this.deniedNeed): boolean {
    return now < this.deniedUntil && n === this.deniedNeed;
  }

  /**
   * The batch to ask for, sent now, by a decision that needs `need` permits: sized to the demand since the
   * last take (`BATCH_TARGET_MS` of it, or what is left of the live batch's window if less), at most doubled,
   * at least `need`, at most the limit.
   */
  want(need: number, now: number): number {
    // After a refused take nothing could be spent: no demand was measured, and the size stands (measuring it
    // would say zero, and the next window would start from one permit per take).
    if (!this.refused) {
      const elapsed = Math.max(now - this.since, 1);
      const demand = Math.ceil((this.spent / elapsed) * BATCH_TARGET_MS);
      this.size = Math.max(1, Math.min(demand, this.size * 2, this.limit));
    }
    this.refused = false;
    this.spent = 0;
    this.since = now;
    // Taken while the batch's window (segment) lives, the permits are void at its end: no more than that long
    // of the demand (more would be stranded, counted by Redis and never spent).
    const left = this.endsAt - now;
    const size =
      left > 0 && left < BATCH_TARGET_MS ? Math.ceil((this.size * left) / BATCH_TARGET_MS) : this.size;
    return Math.min(this.limit, Math.max(size, need));
  }

  /**
   * Redis granted `granted` permits counted at `mark`, live `endMs` more from when the take was sent
   * (`sentAt`). Permits left of an earlier mark are handed back for a give-back (never spent, and no longer
   * spendable); of the same mark they are kept.
   */
  filled(
    granted: number,
    mark: string,
    endMs: number,
    resetMs: number,
    fleet: number,
    sentAt: number,
  ): { permits: number; mark: string } | undefined {
    let back: { permits: number; mark: string } | undefined;
    if (mark === this.mark) {
      this.permits += granted;
    } else {
      if (this.permits > 0) back = { permits: this.permits, mark: this.mark };
      this.permits = granted;
      this.mark = mark;
    }
    this.endsAt = sentAt + endMs;
    this.resetAt = sentAt + resetMs;
    this.fleet = fleet;
    this.deniedUntil = Number.NEGATIVE_INFINITY;
    return back;
  }

  /** Redis rejected a take for `need`: rejected here until `retryMs` after the answer came (`now`). */
  rejected(retryMs: number, now: number, need = 1): void {
    this.deniedUntil = now + retryMs;
    this.deniedNeed = need;
    this.refused = true;
  }

  /**
   * The permits to give back (and forget) when none was spent since the last check, or the batch is void:
   * demand fell, or the window moved on; undefined when there are none.
   */
  idle(now: number): { permits: number; mark: string } | undefined {
    const busy = this.busy;
    this.busy = false;
    if (this.permits === 0 || (busy && now < this.endsAt)) return undefined;
    return this.takeAll();
  }

  /** Every permit left, given up (a give-back): the batch is empty after. */
  takeAll(): { permits: number; mark: string } | undefined {
    if (this.permits === 0) return undefined;
    const back = { permits: this.permits, mark: this.mark };
    this.permits = 0;
    return back;
  }

  /**
   * A grant of `n` permits made from this batch at `mark` is refunded: back into the batch while it is live
   * and the same, else false (the caller gives them back to Redis at `mark`).
   */
  refund(n: number, mark: string, now: number): boolean {
    if (mark !== this.mark || now >= this.endsAt) return false;
    this.permits += n;
    return true;
  }

  /** Remaining permits as well as this process knows: the fleet's at the take, and what is left here. */
  remaining(): number {
    return this.fleet + this.permits;
  }

  /** Nothing held and nothing to remember: the entry can be dropped. */
  empty(now: number): boolean {
    return this.permits === 0 && now >= this.endsAt && now >= this.deniedUntil;
  }
}
