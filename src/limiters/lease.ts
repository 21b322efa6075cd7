/**
 * How the work a lease guarded went, for an adaptive limiter's learning (other limiters ignore it):
 * `dropped` — it failed in a way that says the dependency is overloaded (a timeout, a 5xx it returned);
 * `ignore` — say nothing (the round trip measured something else: a cancelled call, a cache hit).
 * No outcome, or neither flag, is a success whose round-trip time is a latency sample.
 */
export interface ReleaseOutcome {
  dropped?: boolean;
  ignore?: boolean;
}

/** Why a lease was not granted. */
export type RejectionReason = 'limit' | 'queue-full' | 'evicted' | 'overflow' | (string & {});

/**
 * The answer to an acquisition. A granted lease of a concurrency limiter holds its permits until
 * {@link Lease.release}; releasing any other lease does nothing, as time gives those permits back.
 * Disposable: `using lease = await limiter.acquire()`.
 */
export class Lease implements Disposable {
  /** The partition key, when a partitioned limiter decided (a chain sets it on each member's lease). */
  key: string | undefined = undefined;

  /**
   * @param granted Whether the permits were granted.
   * @param reason Why not, when not granted.
   * @param retryAfterMs When not granted by a time-based limiter: the time until a request of this size could be
   *   granted, ignoring later arrivals. Never more than the true time.
   * @param limit The limit of the limiter that decided.
   * @param remaining Permits left after this decision (0 when none).
   * @param resetAfterMs Time until the limiter is back to full capacity, when known.
   * @param source The limiter that decided (for a chain: the member that said no, or undefined when granted).
   */
  constructor(
    readonly granted: boolean,
    readonly reason: RejectionReason | undefined,
    readonly retryAfterMs: number | undefined,
    readonly limit: number,
    readonly remaining: number,
    readonly resetAfterMs: number | undefined,
    readonly source?: object,
  ) {}

  /**
   * Returns the permits of a concurrency lease; idempotent; a no-op for every other lease. `outcome` tells an
   * adaptive limiter how the work went (see {@link ReleaseOutcome}); omitted, it is a success.
   */
  release(_outcome?: ReleaseOutcome): void {}

  /**
   * Gives the permits of a granted lease of a time-based limiter back (Go's `Reservation.Cancel`): into the window
   * or bucket they came from while it is current, never into a later one, never above the limit — a request
   * that should not count (`skipSuccessfulRequests`). Idempotent: only the first call gives back. A concurrency
   * lease releases instead; a rejected lease has nothing to give.
   */
  refund(): void {}

  [Symbol.dispose](): void {
    this.release();
  }
}

/** Whoever takes a held lease's permits back. */
export interface PermitOwner {
  releasePermits(slot: number, permits: number, heldSince: number, outcome?: ReleaseOutcome): void;
}

/** Whoever takes a refunded lease's permits back. */
export interface RefundOwner {
  refundPermits(slot: number, permits: number, mark: number, generation: number): void;
}

/** A granted lease of a time-based limiter, which can be refunded once. */
export class RefundableLease extends Lease {
  private owner: RefundOwner | undefined;

  constructor(
    limit: number,
    remaining: number,
    resetAfterMs: number | undefined,
    source: object | undefined,
    owner: RefundOwner,
    private readonly slot: number,
    private readonly permits: number,
    private readonly mark: number,
    private readonly generation: number,
  ) {
    super(true, undefined, undefined, limit, remaining, resetAfterMs, source);
    this.owner = owner;
  }

  override refund(): void {
    const owner = this.owner;
    if (owner === undefined) return;
    this.owner = undefined;
    owner.refundPermits(this.slot, this.permits, this.mark, this.generation);
  }
}

/** A granted lease that holds permits until released. */
export class HeldLease extends Lease {
  private owner: PermitOwner | undefined;

  constructor(
    limit: number,
    remaining: number,
    private readonly permits: number,
    owner: PermitOwner,
    private readonly slot: number,
    private readonly heldSince: number,
    source?: object,
  ) {
    super(true, undefined, undefined, limit, remaining, undefined, source);
    this.owner = owner;
  }

  override release(outcome?: ReleaseOutcome): void {
    const owner = this.owner;
    if (owner === undefined) return;
    this.owner = undefined;
    owner.releasePermits(this.slot, this.permits, this.heldSince, outcome);
  }
}

/** The lease of a chain: one lease per member, released together. */
export class ChainLease extends Lease {
  constructor(
    decisive: Lease,
    retryAfterMs: number | undefined,
    /** Each member's lease, in chain order (empty members' leases are not created for a rejection). */
    readonly members: readonly Lease[],
    source?: object,
  ) {
    super(
      decisive.granted,
      decisive.reason,
      retryAfterMs,
      decisive.limit,
      decisive.remaining,
      decisive.resetAfterMs,
      source,
    );
  }

  override release(outcome?: ReleaseOutcome): void {
    for (const lease of this.members) lease.release(outcome);
  }

  /** Refunds every member (each member's lease gives back at most once). */
  override refund(): void {
    for (const lease of this.members) lease.refund();
  }
}
