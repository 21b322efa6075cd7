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

/**
 * Why a lease was not granted: `'limit'` (no permits), `'queue-full'`, `'evicted'` (a newer or higher-class
 * waiter took its place), `'overflow'` (a partitioned limiter full of live partitions), `'unavailable'` (the
 * store could not be asked and its fallback refused), `'locked'` (the key is locked — by a `lockout()` after
 * repeated failures, or by `lock(key, duration)` —: `retryAfterMs` is the time left on the lock), `'too-large'`
 * (over HTTP: a route's cost estimate above the limit of a limiter that does not allow `overdraw`, answered 413;
 * no `retryAfterMs`: it could never be granted), or a limiter's own reason.
 */
export type RejectionReason =
  | 'limit'
  | 'queue-full'
  | 'evicted'
  | 'overflow'
  | 'unavailable'
  | 'locked'
  | 'too-large'
  | (string & {});

/** What a lease says about how it was decided, beyond its fields. */
export interface LeaseMetadata {
  /** The store's fallback (a Redis store's `onUnavailable`) answered, not the store: it could not be asked. */
  readonly fallback?: boolean;
}

/** The fields of a lease, as {@link Lease.granted} and {@link Lease.rejected} take them. */
export interface LeaseFields {
  /** The limit of the limiter that decided. */
  readonly limit: number;
  /** Permits left after this decision (0 when none). */
  readonly remaining: number;
  /** Time until the limiter is back to full capacity, when known, in whole milliseconds (rounded up). */
  readonly resetAfterMs?: number | undefined;
  /**
   * When not granted by a time-based limiter: the time until a request of this size could be granted, ignoring
   * later arrivals, in whole milliseconds rounded up: never less than the true time, less than 1 ms more.
   */
  readonly retryAfterMs?: number | undefined;
  /** The limiter that decided. */
  readonly source?: object | undefined;
  /** The partition key, when a partitioned limiter decided. */
  readonly key?: string | undefined;
  readonly metadata?: LeaseMetadata | undefined;
}

const NO_METADATA: LeaseMetadata = Object.freeze({});

/**
 * @internal A time in whole milliseconds, rounded up: a clock's fractions (performance.now()) would otherwise show
 * as noise (59992.345506000005), and rounding down would tell a client to come back before it can succeed.
 */
export function wholeMs(ms: number | undefined): number | undefined {
  return ms === undefined ? undefined : Math.ceil(ms);
}

/** @internal A real cost: a whole number ≥ 0, or a TypeError/RangeError naming the call and the value. */
export function checkCost(actual: unknown): asserts actual is number {
  if (typeof actual !== 'number') {
    throw new TypeError(
      `floodgate: lease.settle(actual): actual must be a whole number ≥ 0; got ${show(actual)}`,
    );
  }
  if (!Number.isInteger(actual) || actual < 0) {
    throw new RangeError(
      `floodgate: lease.settle(actual): actual must be a whole number ≥ 0 (a finite cost); got ${show(actual)}`,
    );
  }
}

function show(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/**
 * The answer to an acquisition, immutable. A granted lease of a concurrency limiter holds its permits until
 * {@link Lease.release}; releasing any other lease does nothing, as time gives those permits back.
 * Disposable: `using lease = await limiter.acquire()`. Made by {@link Lease.granted} and {@link Lease.rejected}
 * (a limiter of your own answers with these).
 */
export class Lease implements Disposable {
  // Fields are declared, not defined (`declare`): assigned in the constructor, they are plain stores that the
  // optimising compiler inlines with the allocation; class fields with define semantics cost an extra definition
  // each, on every decision (callgrind, December 2026).
  /** Whether the permits were granted. */
  declare readonly granted: boolean;
  /** Why not, when not granted. */
  declare readonly reason: RejectionReason | undefined;
  /** See {@link LeaseFields.retryAfterMs}. */
  declare readonly retryAfterMs: number | undefined;
  /** The limit of the limiter that decided. */
  declare readonly limit: number;
  /** Permits left after this decision (0 when none). */
  declare readonly remaining: number;
  /** Time until the limiter is back to full capacity, when known. */
  declare readonly resetAfterMs: number | undefined;
  /** The limiter that decided (for a chain: the member that said no, or undefined when granted). */
  declare readonly source: object | undefined;
  /** The partition key, when a partitioned limiter decided (a chain's lease: on each member's lease). */
  declare readonly key: string | undefined;

  /** Positional for the subclasses' hot paths; everyone else uses {@link Lease.granted} and {@link Lease.rejected}. */
  protected constructor(
    granted: boolean,
    reason: RejectionReason | undefined,
    retryAfterMs: number | undefined,
    limit: number,
    remaining: number,
    resetAfterMs: number | undefined,
    source: object | undefined,
    key: string | undefined,
  ) {
    // Times come rounded (`wholeMs`): this constructor's size counts against the inlining budget.
    ownFields(this, granted, reason, retryAfterMs, limit, remaining, resetAfterMs, source, key);
  }

  /** A granted lease that holds nothing (time gives its permits back, or it was a zero-permit probe). */
  static granted(fields: LeaseFields): Lease {
    const { limit, remaining, source, key, metadata } = fields;
    const resetAfterMs = wholeMs(fields.resetAfterMs);
    if (metadata !== undefined) {
      return new NotedLease(
        true,
        undefined,
        undefined,
        limit,
        remaining,
        resetAfterMs,
        source,
        key,
        metadata,
      );
    }
    return new Lease(true, undefined, undefined, limit, remaining, resetAfterMs, source, key);
  }

  /** @internal A rejected lease from its fields in order (the engine's rejection path). */
  static refused(
    reason: RejectionReason,
    retryAfterMs: number | undefined,
    limit: number,
    remaining: number,
    resetAfterMs: number | undefined,
    source: object | undefined,
    key: string | undefined,
  ): Lease {
    return new Lease(
      false,
      reason,
      wholeMs(retryAfterMs),
      limit,
      remaining,
      wholeMs(resetAfterMs),
      source,
      key,
    );
  }

  /** A rejected lease. */
  static rejected(reason: RejectionReason, fields: LeaseFields): Lease {
    const { limit, remaining, source, key, metadata } = fields;
    const retryAfterMs = wholeMs(fields.retryAfterMs);
    const resetAfterMs = wholeMs(fields.resetAfterMs);
    if (metadata !== undefined) {
      return new NotedLease(
        false,
        reason,
        retryAfterMs,
        limit,
        remaining,
        resetAfterMs,
        source,
        key,
        metadata,
      );
    }
    return new Lease(false, reason, retryAfterMs, limit, remaining, resetAfterMs, source, key);
  }

  /**
   * How it was decided (see {@link LeaseMetadata}): nothing to say for most leases. A getter, so that the leases
   * of every decision carry no field for what only a store's fallback answers say.
   */
  get metadata(): LeaseMetadata {
    return NO_METADATA;
  }

  /**
   * `lease`'s answer under another partition key and metadata, releasing and refunding through it (a store's
   * fallback answering with an in-memory limiter's lease).
   */
  static forwarding(lease: Lease, key: string | undefined, metadata: LeaseMetadata): Lease {
    return new ForwardingLease(lease, key, metadata);
  }

  /** Each member's lease, for a chain's lease (see {@link ChainLease}); undefined for any other. */
  get members(): readonly Lease[] | undefined {
    return undefined;
  }

  /** Whether {@link release} gives permits back (a concurrency lease, or a chain's lease holding one). */
  get holdsPermits(): boolean {
    return false;
  }

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

  /**
   * Settles the grant at its real cost, once: the difference from the permits asked (the estimate) is charged
   * when `actual` is higher, given back when lower. A charge goes to the window, segment or bucket current now
   * (the grant's own while it is current) and is recorded even past the limit — the work was done — so a bucket
   * goes below zero and a fixed window's count over its limit carries into the next windows, paid from the next
   * capacity. A give-back follows the rules of {@link refund}: only into the window or segment the grant came
   * from while it is current, never above the limit. A lease never settled keeps its estimate.
   *
   * A chain's lease settles every member that counts cost (see `unit`); a member that counts requests took one
   * permit and is never settled. Throws — changing nothing — for a cost that is not a whole number ≥ 0, a
   * second settle, a settle after {@link refund}, a rejected lease, and a lease with nothing reserved (a
   * concurrency lease, a zero-permit probe). On a Redis store a settle is one command (a chain's: one request).
   */
  settle(actual: number): void {
    checkCost(actual);
    throw this.unsettleable() ?? new Error('floodgate: lease.settle(): this lease cannot be settled');
  }

  /** @internal Why {@link settle} would throw, or undefined when it would settle. */
  unsettleable(): Error | undefined {
    if (!this.granted) {
      return new Error(
        `floodgate: lease.settle(): the lease was rejected (${JSON.stringify(this.reason)}) and reserved nothing; settle only a granted lease`,
      );
    }
    return new TypeError(
      'floodgate: lease.settle(): this lease reserved nothing to settle; only a grant of fixedWindow, slidingWindow or tokenBucket (alone, partitioned or chained, in memory or on Redis) that took permits can be settled',
    );
  }

  [Symbol.dispose](): void {
    this.release();
  }
}

/** A lease's own public fields, writable: what {@link ownFields} assigns. */
type OwnFields = {
  -readonly [K in
    | 'granted'
    | 'reason'
    | 'retryAfterMs'
    | 'limit'
    | 'remaining'
    | 'resetAfterMs'
    | 'source'
    | 'key']: Lease[K];
};

/**
 * Assigns a lease's public fields, always in this order (one hidden-class path for every kind of lease): from
 * {@link Lease}'s constructor, and from the constructors of the leases made on every decision, which are not
 * `extends Lease` but linked to it by {@link linkToLease}.
 */
function ownFields(
  lease: object,
  granted: boolean,
  reason: RejectionReason | undefined,
  retryAfterMs: number | undefined,
  limit: number,
  remaining: number,
  resetAfterMs: number | undefined,
  source: object | undefined,
  key: string | undefined,
): void {
  const own = lease as OwnFields;
  own.granted = granted;
  own.reason = reason;
  own.retryAfterMs = retryAfterMs;
  own.limit = limit;
  own.remaining = remaining;
  own.resetAfterMs = resetAfterMs;
  own.source = source;
  own.key = key;
}

/**
 * Makes `leaseClass` a {@link Lease} (`instanceof`, every method it does not define) without `extends`. The
 * leases made on every decision (a time-based grant, a concurrency permit, a chain's) are classes of their own
 * linked so, because in V8 (Node 20) `new` of a derived class whose `name` was redefined is ~20× slower, and
 * esbuild's `keepNames` — tsx, and bundles that keep class names for dependency injection — redefines `name` on
 * every class: each decision was 5-7× slower than the build (6 December 2026, 343-638 ns against 54-59 ns).
 */
function linkToLease(leaseClass: { prototype: object }): void {
  Object.setPrototypeOf(leaseClass.prototype, Lease.prototype);
}

/** A lease with metadata of its own. */
class NotedLease extends Lease {
  readonly #metadata: LeaseMetadata;

  constructor(
    granted: boolean,
    reason: RejectionReason | undefined,
    retryAfterMs: number | undefined,
    limit: number,
    remaining: number,
    resetAfterMs: number | undefined,
    source: object | undefined,
    key: string | undefined,
    metadata: LeaseMetadata,
  ) {
    super(granted, reason, retryAfterMs, limit, remaining, resetAfterMs, source, key);
    this.#metadata = metadata;
  }

  override get metadata(): LeaseMetadata {
    return this.#metadata;
  }
}

class ForwardingLease extends Lease {
  readonly #metadata: LeaseMetadata;

  constructor(
    private readonly inner: Lease,
    key: string | undefined,
    metadata: LeaseMetadata,
  ) {
    super(
      inner.granted,
      inner.reason,
      inner.retryAfterMs,
      inner.limit,
      inner.remaining,
      inner.resetAfterMs,
      inner.source,
      key,
    );
    this.#metadata = metadata;
  }

  override get metadata(): LeaseMetadata {
    return this.#metadata;
  }

  override get holdsPermits(): boolean {
    return this.inner.holdsPermits;
  }

  override release(outcome?: ReleaseOutcome): void {
    this.inner.release(outcome);
  }

  override refund(): void {
    this.inner.refund();
  }

  override settle(actual: number): void {
    this.inner.settle(actual);
  }

  override unsettleable(): Error | undefined {
    return this.inner.unsettleable();
  }
}

/** Whoever takes a held lease's permits back. */
export interface PermitOwner {
  releasePermits(slot: number, permits: number, heldSince: number, outcome?: ReleaseOutcome): void;
}

/** Whoever takes a refunded lease's permits back, and settles a lease's real cost. */
export interface RefundOwner {
  refundPermits(slot: number, permits: number, mark: number, generation: number): void;
  /** Charges `actual − estimate` now, or gives `estimate − actual` back by the refund rules (see `Lease.settle`). */
  settlePermits(
    slot: number,
    estimate: number,
    actual: number,
    mark: number,
    generation: number,
    key: string | undefined,
  ): void;
}

/** The owner of a settled lease: neither a refund nor a second settle reaches a real owner. */
const SETTLED: RefundOwner = {
  refundPermits() {},
  settlePermits() {},
};

/**
 * A granted lease of a time-based limiter, which can be refunded or settled once (`resetAfterMs` whole). A
 * {@link Lease} by {@link linkToLease}: the engine makes one on every granted decision.
 */
export interface RefundableLease extends Lease {}

/** See the interface above. */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface is what linkToLease (Lease's methods) and the constructor (Lease's fields) supply.
export class RefundableLease {
  declare private owner: RefundOwner | undefined;
  declare private readonly slot: number;
  declare private readonly permits: number;
  declare private readonly mark: number;
  declare private readonly generation: number;

  constructor(
    limit: number,
    remaining: number,
    resetAfterMs: number | undefined,
    source: object | undefined,
    owner: RefundOwner,
    slot: number,
    permits: number,
    mark: number,
    generation: number,
    key: string | undefined,
  ) {
    // ownFields written out: through it, this constructor cost ~10 instructions more a decision (callgrind).
    const own = this as unknown as OwnFields;
    own.granted = true;
    own.reason = undefined;
    own.retryAfterMs = undefined;
    own.limit = limit;
    own.remaining = remaining;
    own.resetAfterMs = resetAfterMs;
    own.source = source;
    own.key = key;
    this.owner = owner;
    this.slot = slot;
    this.permits = permits;
    this.mark = mark;
    this.generation = generation;
  }

  /** Once settled, the cost stands: a refund then gives nothing back. */
  refund(): void {
    const owner = this.owner;
    if (owner === undefined || owner === SETTLED) return;
    this.owner = undefined;
    owner.refundPermits(this.slot, this.permits, this.mark, this.generation);
  }

  settle(actual: number): void {
    checkCost(actual);
    const owner = this.owner;
    if (owner === undefined || owner === SETTLED) throw this.unsettleable();
    this.owner = SETTLED;
    if (actual !== this.permits) {
      owner.settlePermits(this.slot, this.permits, actual, this.mark, this.generation, this.key);
    }
  }

  unsettleable(): Error | undefined {
    if (this.owner === undefined) {
      return new Error('floodgate: lease.settle(): the lease was refunded; there is nothing left to settle');
    }
    if (this.owner === SETTLED) return new Error('floodgate: lease.settle(): the lease is settled already');
    return undefined;
  }
}
linkToLease(RefundableLease);

/** A granted lease that holds permits until released. A {@link Lease} by {@link linkToLease}. */
export interface HeldLease extends Lease {}

/** See the interface above. */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface is what linkToLease (Lease's methods) and the constructor (Lease's fields) supply.
export class HeldLease {
  declare private owner: PermitOwner | undefined;
  declare private readonly permits: number;
  declare private readonly slot: number;
  declare private readonly heldSince: number;

  constructor(
    limit: number,
    remaining: number,
    permits: number,
    owner: PermitOwner,
    slot: number,
    heldSince: number,
    source: object | undefined,
    key: string | undefined,
  ) {
    ownFields(this, true, undefined, undefined, limit, remaining, undefined, source, key);
    this.owner = owner;
    this.permits = permits;
    this.slot = slot;
    this.heldSince = heldSince;
  }

  get holdsPermits(): boolean {
    return true;
  }

  release(outcome?: ReleaseOutcome): void {
    const owner = this.owner;
    if (owner === undefined) return;
    this.owner = undefined;
    owner.releasePermits(this.slot, this.permits, this.heldSince, outcome);
  }

  unsettleable(): Error {
    return new TypeError(
      'floodgate: lease.settle(): a concurrency lease holds permits until release(); it has no cost to settle',
    );
  }
}
linkToLease(HeldLease);

/** The lease of a chain: one lease per member, released together. A {@link Lease} by {@link linkToLease}. */
export interface ChainLease extends Lease {}

/** See the interface above. */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface is what linkToLease (Lease's methods) and the constructor (Lease's fields) supply.
export class ChainLease {
  readonly #members: readonly Lease[];

  /**
   * @param decisive The member's lease whose fields it shows (the rejecting one, or the one with least left).
   * @param members Each member's lease, in chain order (a rejection carries only the rejecting member's).
   */
  constructor(
    decisive: Lease,
    retryAfterMs: number | undefined,
    members: readonly Lease[],
    source: object | undefined,
  ) {
    ownFields(
      this,
      decisive.granted,
      decisive.reason,
      wholeMs(retryAfterMs),
      decisive.limit,
      decisive.remaining,
      decisive.resetAfterMs,
      source,
      undefined,
    );
    this.#members = members;
  }

  /** Each member's lease, in chain order (empty members' leases are not created for a rejection). */
  get members(): readonly Lease[] {
    return this.#members;
  }

  get holdsPermits(): boolean {
    for (const lease of this.#members) if (lease.holdsPermits) return true;
    return false;
  }

  release(outcome?: ReleaseOutcome): void {
    for (const lease of this.#members) lease.release(outcome);
  }

  /** Refunds every member (each member's lease gives back at most once). */
  refund(): void {
    for (const lease of this.#members) lease.refund();
  }

  /**
   * Settles every member that counts cost, all or nothing: every one is checked before any is charged. When no
   * member counts cost (every member counts requests, as by default), every member took the permits asked and
   * every member settles.
   */
  settle(actual: number): void {
    checkCost(actual);
    const error = this.unsettleable();
    if (error !== undefined) throw error;
    const settling = this.settling();
    for (const lease of settling) lease.settle(actual);
  }

  unsettleable(): Error | undefined {
    if (!this.granted) return Lease.prototype.unsettleable.call(this);
    for (const lease of this.settling()) {
      const error = lease.unsettleable();
      if (error !== undefined) return error;
    }
    return undefined;
  }

  /** The members' leases a settle reaches: the cost members' (see `Limiter.unit`), or all when there are none. */
  protected settling(): readonly Lease[] {
    const members = this.#members;
    const cost = members.filter((lease) => unitOf(lease.source) !== 'requests');
    return cost.length > 0 ? cost : members;
  }
}
linkToLease(ChainLease);

/** What one permit of `limiter` is (`Limiter.unit`): `'requests'` when it does not say. */
export function unitOf(limiter: unknown): string {
  const unit = (limiter as { unit?: unknown } | undefined)?.unit;
  return typeof unit === 'string' ? unit : 'requests';
}

/** @internal `commit`'s lease: a call keeps `commit` whole for the inliner (docs/architecture.md). */
export function grantLease(
  limit: number,
  remaining: number,
  resetAfterMs: number,
  source: object | undefined,
  owner: RefundOwner,
  slot: number,
  permits: number,
  mark: number,
  generation: number,
  key: string | undefined,
): Lease {
  return new RefundableLease(
    limit,
    remaining,
    resetAfterMs,
    source,
    owner,
    slot,
    permits,
    mark,
    generation,
    key,
  );
}
