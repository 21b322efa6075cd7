import { ChainLease, checkCost, Lease, wholeMs } from '../limiters/lease.ts';
import type { BoundMember } from './binding.ts';

/** One member's part of a settle: `delta` more charged (> 0) or `−delta` given back (< 0). */
export interface SettlePart {
  readonly member: BoundMember;
  readonly delta: number;
  readonly expectedResetMs: number;
}

/** Sends a settle's parts as one request (op `s`), coalesced with the decisions of its tick. */
export type SettleSender = (parts: readonly SettlePart[]) => void;

/**
 * A granted lease of a time-based Redis limiter, refundable once (see `Lease.refund`). Redis keeps no record
 * of the grant: the refund tells the script when the grant's window (or segment) ends from now — the reset
 * time the grant answered, minus the time since — and the script gives the permits back only to the window
 * that ends then (a later one ends a whole window further; a round trip is far shorter than half a window, or
 * half a segment of a sliding window).
 */
export class RedisRefundableLease extends Lease {
  #refund: ((permits: number, expectedResetMs: number, emptied: boolean) => void) | undefined;
  #settled = false;

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
    private readonly member: BoundMember,
    private readonly send: SettleSender,
  ) {
    super(true, undefined, undefined, limit, remaining, wholeMs(resetAfterMs), source, key);
    this.#refund = refund;
  }

  override refund(): void {
    const refund = this.#refund;
    if (refund === undefined || this.#settled) return;
    this.#refund = undefined;
    refund(this.permits, this.expectedReset(), this.remaining === 0);
  }

  /**
   * See `Lease.settle`: one command (op `s`), coalesced with the decisions of the same tick. A failure leaves the
   * estimate charged, as if never settled.
   */
  override settle(actual: number): void {
    checkCost(actual);
    const error = this.unsettleable();
    if (error !== undefined) throw error;
    const part = this.claim(actual);
    if (part !== undefined) this.send([part]);
  }

  /** @internal Marks it settled at `actual` (checked) and answers its part, undefined when nothing changes. */
  claim(actual: number): SettlePart | undefined {
    this.#settled = true;
    if (actual === this.permits) return undefined;
    return { member: this.member, delta: actual - this.permits, expectedResetMs: this.expectedReset() };
  }

  override unsettleable(): Error | undefined {
    if (this.#refund === undefined) {
      return new Error('floodgate: lease.settle(): the lease was refunded; there is nothing left to settle');
    }
    if (this.#settled) return new Error('floodgate: lease.settle(): the lease is settled already');
    return undefined;
  }

  /** The grant's reset time from now, as this process reckons it (see the class's comment). */
  private expectedReset(): number {
    let reset = this.resetAfterMs ?? 0;
    // A fixed window's overdraw leaves debt, paid windows further: its own window ends within one window.
    const algorithm = this.member.spec.algorithm;
    const w = algorithm.windowMs;
    if (algorithm.kind === 'fixed-window' && w !== undefined && reset > w)
      reset -= Math.ceil(reset / w - 1) * w;
    return reset - (this.clock() - this.grantedAt);
  }
}

/** A granted lease of a Redis chain: its members settle in one request, all or nothing (see `Lease.settle`). */
export class RedisChainLease extends ChainLease {
  constructor(
    decisive: Lease,
    members: readonly Lease[],
    private readonly send: SettleSender,
  ) {
    super(decisive, undefined, members, undefined);
  }

  override settle(actual: number): void {
    checkCost(actual);
    const error = this.unsettleable();
    if (error !== undefined) throw error;
    const parts: SettlePart[] = [];
    for (const lease of this.settling()) {
      const part = (lease as RedisRefundableLease).claim(actual);
      if (part !== undefined) parts.push(part);
    }
    if (parts.length > 0) this.send(parts);
  }
}
