import { Lease } from '../limiters/lease.ts';

/**
 * A granted lease of a time-based Redis limiter, refundable once (see `Lease.refund`). Redis keeps no record
 * of the grant: the refund tells the script when the grant's window (or segment) ends from now — the reset
 * time the grant answered, minus the time since — and the script gives the permits back only to the window
 * that ends then (a later one ends a whole window further; a round trip is far shorter than half a window, or
 * half a segment of a sliding window).
 */
export class RedisRefundableLease extends Lease {
  #refund: ((permits: number, expectedResetMs: number, emptied: boolean) => void) | undefined;

  constructor(
    limit: number,
    remaining: number,
    resetAfterMs: number | undefined,
    source: object,
    key: string | undefined,
    private readonly permits: number,
    /** The clock (test clock or `performance.now()`) at the grant. */
    private readonly grantedAt: number,
    private readonly clock: () => number,
    /** `emptied`: the grant left no permits (a lockout's grant that started the lockout). */
    refund: (permits: number, expectedResetMs: number, emptied: boolean) => void,
  ) {
    super(true, undefined, undefined, limit, remaining, resetAfterMs, source, key);
    this.#refund = refund;
  }

  override refund(): void {
    const refund = this.#refund;
    if (refund === undefined) return;
    this.#refund = undefined;
    refund(this.permits, (this.resetAfterMs ?? 0) - (this.clock() - this.grantedAt), this.remaining === 0);
  }
}
