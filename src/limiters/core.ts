import type { Algorithm } from '../algorithms/algorithm.ts';
import { MemoryTable } from '../stores/memory-table.ts';
import {
  grantLease,
  HeldLease,
  Lease,
  type PermitOwner,
  RefundableLease,
  type RefundOwner,
  type RejectionReason,
  type ReleaseOutcome,
} from './lease.ts';
import { DEFAULT_RANK } from './priority.ts';
import { type Waiter, WaitQueue } from './wait-queue.ts';

/** A monotonic clock in milliseconds. */
export interface Clock {
  now(): number;
}

/** Which waiter is served first when permits come back. */
export type QueueOrder = 'oldest-first' | 'newest-first';

/** How one limiter (or every partition of one spec) decides and queues. */
export interface CoreOptions {
  readonly queueLimit: number;
  readonly queueOrder: QueueOrder;
  readonly countRejected: boolean;
  readonly clock: Clock;
  /** What one permit is, when not a request (see `TimeOptions.unit`). */
  readonly unit?: string;
  /** Whether a request may ask for more than the limit (see `TimeOptions.overdraw`); absent: it may not. */
  readonly overdraw?: true;
}

/**
 * How many times a limit changed in this process (`setLimit`). Whatever caches text built from a limit (the
 * `RateLimit-Policy` items of hot keys) compares it with the count it was built at: one number per request.
 */
export const LIMIT_CHANGES = { count: 0 };

/** What identifies a limiter's settings: two specs with equal signatures decide alike and may share storage. */
export function signatureOf(algorithm: Algorithm, options: CoreOptions): string {
  const base = `${algorithm.signature}|q${options.queueLimit}:${options.queueOrder}:${options.countRejected ? 1 : 0}`;
  return options.overdraw === true ? `${base}:o` : base;
}

/** A queued acquisition. `admit`, when set, takes over the grant (a chain checks its other members). */
export interface CoreWaiter extends Waiter {
  resolve(lease: Lease): void;
  reject(reason: unknown): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  admit: ((core: LimiterCore, slot: number, now: number) => void) | undefined;
  /** The partition key its lease will carry. */
  key: string | undefined;
}

/**
 * The decision engine over one {@link MemoryTable}: every partition of one limiter spec shares it. It advances
 * state lazily, grants or rejects, keeps a queue per partition that has waiters, and runs one wake-up timer only
 * while someone waits on a time-based algorithm.
 */
export class LimiterCore implements PermitOwner, RefundOwner {
  readonly table: MemoryTable;
  /** {@link signatureOf} the settings it decides with now (they change with {@link retune}). */
  signature: string;
  /** Totals over every partition: requests granted and rejected (probes and cancellations are not counted). */
  granted = 0;
  rejected = 0;
  /** Permits waiting in all queues, and how many waiters. */
  queuedPermits = 0;
  waiting = 0;
  /** Concurrency leases returned so far: a partition may have become droppable. */
  releases = 0;
  /** The public object that leases name as their source. */
  source: object | undefined;
  private readonly queues = new Map<number, WaitQueue<CoreWaiter>>();
  private readonly newestFirst: boolean;
  /** `options.overdraw`, read where a request is short of permits (one load less than through `options`). */
  private readonly overdraw: boolean;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;

  constructor(
    /** The parameters every state here is decided with; replaced, never mutated, by {@link retune}. */
    public algorithm: Algorithm,
    readonly options: CoreOptions,
  ) {
    this.table = new MemoryTable(algorithm.width);
    this.signature = signatureOf(algorithm, options);
    this.newestFirst = options.queueOrder === 'newest-first';
    this.overdraw = options.overdraw === true;
  }

  /** Takes a slot and writes a fresh state anchored at `now`. */
  allocate(now: number): number {
    const slot = this.table.allocate();
    this.algorithm.init(this.table.states, slot * this.algorithm.width, now);
    return slot;
  }

  /** Gives `slot` back (a partition dropped because it was idle). */
  free(slot: number): void {
    this.table.release(slot);
  }

  /** Whether the partition in `slot` can be dropped without changing any decision: full and nobody queued. */
  isIdle(slot: number, now: number): boolean {
    if (this.queues.has(slot)) return false;
    const o = slot * this.algorithm.width;
    const s = this.table.states;
    this.algorithm.advance(s, o, now);
    return this.algorithm.isFull(s, o);
  }

  /** Milliseconds until the partition in `slot` is full again (NaN when unknown). */
  resetAfter(slot: number, now: number): number {
    const o = slot * this.algorithm.width;
    this.algorithm.advance(this.table.states, o, now);
    return this.algorithm.resetAfter(this.table.states, o, now);
  }

  /** Permits available in `slot` now, and permits queued there. */
  peek(slot: number, now: number): { available: number; queued: number } {
    const o = slot * this.algorithm.width;
    this.algorithm.advance(this.table.states, o, now);
    const available = Math.max(0, this.algorithm.available(this.table.states, o));
    return { available, queued: this.queues.get(slot)?.permits ?? 0 };
  }

  /** What an administrator reads of `slot` now (see `KeyState`, less the lock the partitioned limiter keeps). */
  inspect(
    slot: number,
    now: number,
  ): { limit: number; remaining: number; resetAfterMs: number | undefined; queued: number } {
    // Through peek, which a core of its own (adaptive) overrides.
    const { available, queued } = this.peek(slot, now);
    return {
      limit: this.algorithm.limit,
      remaining: available,
      resetAfterMs: nanToUndefined(this.resetAfter(slot, now)),
      queued,
    };
  }

  /** Milliseconds left on the algorithm's own lockout of `slot` (a `lockout()`), 0 for one that never locks. */
  lockedFor(slot: number, now: number): number {
    const algorithm = this.algorithm;
    if (algorithm.lockedFor === undefined) return 0;
    const o = slot * algorithm.width;
    algorithm.advance(this.table.states, o, now);
    return algorithm.lockedFor(this.table.states, o, now);
  }

  /** Lifts the algorithm's own lockout of `slot` and forgets the failures behind it; nothing for one that never locks. */
  unlock(slot: number, now: number): void {
    const algorithm = this.algorithm;
    if (algorithm.unlock === undefined) return;
    const o = slot * algorithm.width;
    algorithm.advance(this.table.states, o, now);
    algorithm.unlock(this.table.states, o, now);
  }

  /**
   * `slot` as if never seen (a reset), in place: a time-based state starts afresh (grants made before no longer
   * refund into it); a concurrency state keeps the permits its leases hold, which come back by their release.
   * Then serves the waiters that now fit.
   */
  restart(slot: number, now: number): void {
    if (this.algorithm.timeBased) {
      this.algorithm.init(this.table.states, slot * this.algorithm.width, now);
      this.table.renew(slot);
    }
    if (this.waiting > 0) this.drain(slot, now);
  }

  /** Takes `permits` from `slot` without a request (an administrative charge): it may go below zero. */
  charge(slot: number, permits: number, now: number): void {
    const o = slot * this.algorithm.width;
    this.algorithm.advance(this.table.states, o, now);
    this.algorithm.take(this.table.states, o, permits);
  }

  /**
   * Gives back up to `permits` taken from `slot` (an administrative give-back), never past full: a window's
   * count, a sliding window's segments newest first, a bucket's tokens up to its limit, a concurrency state's
   * count (the caller gives back only what it charged). Then serves the waiters that now fit.
   */
  giveBack(slot: number, permits: number, now: number): void {
    const algorithm = this.algorithm;
    const s = this.table.states;
    const o = slot * algorithm.width;
    algorithm.advance(s, o, now);
    let left = Math.min(permits, algorithm.limit - algorithm.available(s, o));
    if (left <= 0) return;
    if (!algorithm.timeBased) algorithm.give(s, o, left);
    else {
      // Refunds into the newest window or segment first, then older ones still in the window.
      for (let back = 0; left > 0 && back < algorithm.width; back++) {
        const before = algorithm.available(s, o);
        algorithm.refund(s, o, left, algorithm.mark(s, o) - back * (algorithm.markStep ?? 0));
        left -= algorithm.available(s, o) - before;
        if (algorithm.markStep === undefined) break;
      }
    }
    if (this.waiting > 0) this.drain(slot, now);
  }

  /** Answers every waiter of `slot` with `answer` (the key was locked). */
  answerQueued(slot: number, answer: (waiter: CoreWaiter) => Lease): void {
    const queue = this.queues.get(slot);
    if (!queue) return;
    for (let w = queue.head; w !== undefined; ) {
      const after = w.next as CoreWaiter | undefined;
      this.unqueue(queue, w);
      settle(w);
      w.resolve(answer(w));
      w = after;
    }
    this.arm(this.options.clock.now());
  }

  /**
   * Whether `permits` of class `rank` could be granted to a new arrival now: enough available, and nobody of a
   * higher class waiting, nor (oldest-first) of its own class. A zero-permit probe needs one permit available.
   */
  canGrant(slot: number, permits: number, now: number, rank = DEFAULT_RANK): boolean {
    const o = slot * this.algorithm.width;
    const s = this.table.states;
    this.algorithm.advance(s, o, now);
    if (this.algorithm.available(s, o) < (permits === 0 ? 1 : permits)) {
      return this.overdraw && this.canOverdraw(slot, permits, rank);
    }
    return permits === 0 || this.waiting === 0 || this.mayPass(slot, rank);
  }

  /**
   * {@link canGrant} of more permits than the limit (`overdraw`, out of line): granted when the whole limit is
   * available — nothing counted in the window, a full bucket — and nobody it must not pass waits. The state was
   * advanced by `canGrant`.
   */
  private canOverdraw(slot: number, permits: number, rank: number): boolean {
    const limit = this.algorithm.limit;
    if (permits <= limit) return false;
    if (this.algorithm.available(this.table.states, slot * this.algorithm.width) < limit) return false;
    return this.waiting === 0 || this.mayPass(slot, rank);
  }

  /** Whether a new arrival of class `rank` may pass the waiters of `slot` (out of line: rarely anyone waits). */
  private mayPass(slot: number, rank: number): boolean {
    const top = this.queues.get(slot)?.head?.rank;
    return top === undefined || top < rank || (this.newestFirst && top === rank);
  }

  /**
   * Consumes `permits` (already checked with {@link canGrant}) and returns the granted lease: refundable unless
   * the caller says it will never refund (an HTTP route without a refund rule spares the larger lease).
   */
  commit(slot: number, permits: number, now: number, refundable = true, key?: string): Lease {
    const algorithm = this.algorithm;
    // The commonest grant (time-based, refundable) kept small, so that the optimising compiler inlines all of
    // it, the lease's constructors included; the others are in commitOther.
    if (permits === 0 || refundable !== true || algorithm.timeBased !== true) {
      return this.commitOther(slot, permits, now, key);
    }
    const s = this.table.states;
    const o = slot * algorithm.width;
    algorithm.take(s, o, permits);
    this.granted++;
    return grantLease(
      algorithm.limit,
      Math.max(0, algorithm.available(s, o)),
      Math.ceil(algorithm.resetAfter(s, o, now)),
      this.source,
      this,
      slot,
      permits,
      algorithm.mark(s, o),
      this.table.generation(slot),
      key,
    );
  }

  /** {@link commit} of a zero-permit probe, a lease that will never be refunded, or a concurrency permit. */
  private commitOther(slot: number, permits: number, now: number, key?: string): Lease {
    const algorithm = this.algorithm;
    const s = this.table.states;
    const o = slot * algorithm.width;
    if (permits === 0) {
      return Lease.granted({
        limit: algorithm.limit,
        remaining: algorithm.available(s, o),
        source: this.source,
        key,
      });
    }
    algorithm.take(s, o, permits);
    this.granted++;
    const remaining = Math.max(0, algorithm.available(s, o));
    if (!algorithm.timeBased) {
      return new HeldLease(algorithm.limit, remaining, permits, this, slot, now, this.source, key);
    }
    return Lease.granted({
      limit: algorithm.limit,
      remaining,
      resetAfterMs: algorithm.resetAfter(s, o, now),
      source: this.source,
      key,
    });
  }

  /** A granted time-based lease gave its permits back (a refund): see {@link Lease.refund}. */
  refundPermits(slot: number, permits: number, mark: number, generation: number): void {
    // The partition was dropped (it was full: nothing to give back) and its slot may hold another key now.
    if (this.table.generation(slot) !== generation) return;
    const now = this.options.clock.now();
    const o = slot * this.algorithm.width;
    this.algorithm.advance(this.table.states, o, now);
    this.algorithm.refund(this.table.states, o, permits, mark);
    if (this.waiting > 0) this.drain(slot, now);
  }

  /**
   * A granted time-based lease settled at its real cost (see {@link Lease.settle}): `actual − estimate` charged
   * to the state now, past the limit if need be, or `estimate − actual` given back by the refund rules.
   */
  settlePermits(
    slot: number,
    estimate: number,
    actual: number,
    mark: number,
    generation: number,
    key: string | undefined,
  ): void {
    const now = this.options.clock.now();
    if (this.table.generation(slot) !== generation) {
      // The partition was dropped (back to full: nothing to give back); a charge goes to the key's partition now.
      if (actual > estimate) chargeKey(this.source, key, actual - estimate, now);
      return;
    }
    this.settleIn(slot, estimate, actual, mark, now);
  }

  /** {@link settlePermits} in `slot`, which holds the lease's partition. */
  settleIn(slot: number, estimate: number, actual: number, mark: number, now: number): void {
    const o = slot * this.algorithm.width;
    this.algorithm.advance(this.table.states, o, now);
    if (actual > estimate) {
      this.algorithm.take(this.table.states, o, actual - estimate);
      // Waiters' wake-up time moved later: the timer is set again for what is left.
      if (this.waiting > 0) this.arm(now);
      return;
    }
    this.algorithm.refund(this.table.states, o, estimate - actual, mark);
    if (this.waiting > 0) this.drain(slot, now);
  }

  /** Gives back permits consumed by {@link commit} in this same step (a chain's rollback). */
  uncommit(slot: number, permits: number): void {
    if (permits === 0) return;
    this.algorithm.give(this.table.states, slot * this.algorithm.width, permits);
    this.granted--;
  }

  /** A rejected lease for `permits` in `slot` now; charges the penalty when rejected requests are counted. */
  reject(
    slot: number,
    permits: number,
    now: number,
    reason: RejectionReason,
    _rank?: number,
    key?: string,
  ): Lease {
    const algorithm = this.algorithm;
    const s = this.table.states;
    const o = slot * algorithm.width;
    algorithm.advance(s, o, now);
    if (permits > 0) {
      this.rejected++;
      if (this.options.countRejected === true) algorithm.take(s, o, permits);
    }
    // An overdraw waits for the whole limit to be free.
    const retry = algorithm.retryAfter(s, o, now, permits > algorithm.limit ? algorithm.limit : permits || 1);
    const reset = algorithm.resetAfter(s, o, now);
    return Lease.refused(
      reason,
      Number.isNaN(retry) ? undefined : retry,
      algorithm.limit,
      Math.max(0, algorithm.available(s, o)),
      Number.isNaN(reset) ? undefined : reset,
      this.source,
      key,
    );
  }

  /** Milliseconds until `permits` could be granted in `slot` (NaN when unknown: concurrency). */
  retryAfter(slot: number, permits: number, now: number): number {
    const algorithm = this.algorithm;
    return algorithm.retryAfter(
      this.table.states,
      slot * algorithm.width,
      now,
      Math.min(permits || 1, algorithm.limit),
    );
  }

  /**
   * {@link tryAcquire} of one refundable permit of the default class, the clock read here: the decision nearly
   * every caller makes (`tryAcquire()`, `tryAcquire(key)`), in one method small enough for the optimising
   * compiler to inline canGrant, commit and reject's work whole (`npm run bench:instructions`, 6 December 2026:
   * a hot-key grant ~190 instructions fewer than through `tryAcquire`, a rejection ~320 fewer). Waiters and
   * concurrency states (adaptive, with classes) go through {@link tryAcquire}, so both answer alike. A
   * time-based core whose `canGrant`, `commit` or `reject` differs (a lockout's) overrides it.
   */
  decideOne(slot: number, key: string | undefined): Lease {
    const algorithm = this.algorithm;
    if (algorithm.timeBased !== true || this.waiting !== 0) {
      return this.tryAcquire(slot, 1, this.options.clock.now(), true, DEFAULT_RANK, key);
    }
    // Read after the branch above: a clock reading passed to a call is boxed (a heap number a decision).
    const now = this.options.clock.now();
    const s = this.table.states;
    const o = slot * algorithm.width;
    algorithm.advance(s, o, now);
    if (algorithm.available(s, o) < 1) {
      // reject() inlined for one permit of a time-based state (callgrind: ~160 instructions a rejection fewer).
      this.rejected++;
      if (this.options.countRejected === true) algorithm.take(s, o, 1);
      return Lease.refused(
        'limit',
        algorithm.retryAfter(s, o, now, 1),
        algorithm.limit,
        Math.max(0, algorithm.available(s, o)),
        algorithm.resetAfter(s, o, now),
        this.source,
        key,
      );
    }
    algorithm.take(s, o, 1);
    this.granted++;
    return new RefundableLease(
      algorithm.limit,
      Math.max(0, algorithm.available(s, o)),
      Math.ceil(algorithm.resetAfter(s, o, now)),
      this.source,
      this,
      slot,
      1,
      algorithm.mark(s, o),
      this.table.generation(slot),
      key,
    );
  }

  /**
   * Decides now, never waits. `rank` is the request's class: waiters of a higher class are not overtaken; `key`
   * the partition key the lease carries.
   */
  tryAcquire(
    slot: number,
    permits: number,
    now: number,
    refundable = true,
    rank = DEFAULT_RANK,
    key?: string,
  ): Lease {
    if (this.canGrant(slot, permits, now, rank)) return this.commit(slot, permits, now, refundable, key);
    return this.reject(slot, permits, now, 'limit', undefined, key);
  }

  /**
   * Grants now if it can, else waits in the queue if there is room, else rejects at once. `key` (a partition's)
   * is set on the lease here, so a partitioned limiter needs no Promise of its own to add it.
   */
  acquire(
    slot: number,
    permits: number,
    signal: AbortSignal | undefined,
    key?: string,
    rank = DEFAULT_RANK,
  ): Promise<Lease> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const now = this.options.clock.now();
    if (this.canGrant(slot, permits, now, rank))
      return Promise.resolve(this.commit(slot, permits, now, true, key));
    return new Promise<Lease>((resolve, reject) => {
      const waiter = newWaiter(permits, now, resolve, reject, signal, undefined);
      waiter.key = key;
      waiter.rank = rank;
      if (!this.enqueue(slot, waiter, now))
        resolve(this.reject(slot, permits, now, this.fullReason(), undefined, key));
    });
  }

  /** The reason a request that can neither be granted nor queued is given. */
  fullReason(): RejectionReason {
    return this.options.queueLimit === 0 ? 'limit' : 'queue-full';
  }

  /**
   * Puts `waiter` in the queue of `slot` if `queueLimit` leaves room. Room is made by evicting waiters of lower
   * classes, lowest and oldest first, and, newest-first, the oldest of its own class; nobody is evicted unless
   * that makes room. Returns false, queueing nothing, when it cannot fit.
   */
  enqueue(slot: number, waiter: CoreWaiter, now: number): boolean {
    const limit = this.options.queueLimit;
    const need = waiter.permits === 0 ? 1 : waiter.permits;
    // More than the limit (lowered since a chain's waiter was checked) could never be served, but by overdraw.
    if (need > limit || (waiter.permits > this.algorithm.limit && this.options.overdraw !== true))
      return false;
    let queue = this.queues.get(slot);
    if (queue && queue.permits + waiter.permits > limit) {
      const evictable = queue.permitsBelow(waiter.rank, this.newestFirst);
      if (queue.permits - evictable + waiter.permits > limit) return false;
      while (queue.head && queue.permits + waiter.permits > limit) {
        const evicted = queue.lowest()!;
        this.unqueue(queue, evicted);
        settle(evicted);
        evicted.resolve(this.reject(slot, evicted.permits, now, 'evicted', undefined, evicted.key));
      }
      queue = this.queues.get(slot);
    }
    if (!queue) {
      queue = new WaitQueue<CoreWaiter>(slot, this);
      this.queues.set(slot, queue);
    }
    queue.push(waiter);
    this.queuedPermits += waiter.permits;
    this.waiting++;
    listenForAbort(waiter);
    this.arm(now);
    return true;
  }

  /** Takes `waiter` out of its queue here (it keeps its abort listener while a chain moves it elsewhere). */
  unqueue(queue: WaitQueue<CoreWaiter>, waiter: CoreWaiter): void {
    queue.remove(waiter);
    this.queuedPermits -= waiter.permits;
    this.waiting--;
    if (queue.count === 0) this.queues.delete(queue.slot);
  }

  /**
   * Whether a class's share lets `need` permits of class `rank` in, where the algorithm has them: always, but in
   * a core with reserved shares (`concurrency({ classes })`). Asked when serving the queue, not on a decision's path.
   */
  protected admits(_slot: number, _need: number, _rank: number): boolean {
    return true;
  }

  /**
   * Serves the queue of `slot` in order (highest class first, then oldest or newest first) while permits allow;
   * head-of-line blocking is by design: no waiter passes one of a higher class, nor an earlier one of its own.
   */
  drain(slot: number, now: number): void {
    const algorithm = this.algorithm;
    for (;;) {
      const queue = this.queues.get(slot);
      if (!queue) break;
      const waiter = this.newestFirst ? queue.newest() : queue.head;
      if (!waiter) break;
      const o = slot * algorithm.width;
      algorithm.advance(this.table.states, o, now);
      // An overdraw (more than the limit) is served once the whole limit is available.
      const need = waiter.permits === 0 ? 1 : Math.min(waiter.permits, algorithm.limit);
      if (algorithm.available(this.table.states, o) < need || !this.admits(slot, need, waiter.rank)) break;
      if (waiter.admit) {
        waiter.admit(this, slot, now);
        if (waiter.queue === queue) break; // still blocked elsewhere
        continue;
      }
      this.unqueue(queue, waiter);
      settle(waiter);
      waiter.resolve(this.commit(slot, waiter.permits, now, true, waiter.key));
    }
    this.arm(now);
  }

  /**
   * Decides every partition here with `next` (same kind and width) from now on, Go's `SetLimitAt`: each state is
   * first brought to `now` under the old parameters, then made valid under the new ones (a bucket never holds
   * more than its new limit). Held permits are not taken back: a lowered limit lets nobody in until they drain.
   * A waiter that asks for more than the new limit can never be served and is rejected (`'limit'`); the others
   * are served at once if the new limit lets them in, and the wake-up timer follows the new rates.
   */
  retune(next: Algorithm, now: number): void {
    const previous = this.algorithm;
    if (next.width !== previous.width || next.kind !== previous.kind) {
      throw new TypeError(`floodgate: cannot retune a ${previous.kind} state to ${next.kind}`);
    }
    const s = this.table.states;
    const width = previous.width;
    const extent = this.table.extent;
    for (let o = 0; o < extent * width; o += width) {
      previous.advance(s, o, now);
      next.retuned(s, o);
    }
    this.algorithm = next;
    this.signature = signatureOf(next, this.options);
    if (this.waiting === 0) return;
    for (const queue of [...this.queues.values()]) {
      for (let w = queue.head; w !== undefined; ) {
        const after = w.next as CoreWaiter | undefined;
        if (w.permits > next.limit && this.options.overdraw !== true) {
          this.unqueue(queue, w);
          settle(w);
          w.resolve(this.reject(queue.slot, w.permits, now, 'limit', undefined, w.key));
        }
        w = after;
      }
    }
    for (const slot of [...this.queues.keys()]) this.drain(slot, now);
    this.arm(now);
  }

  /** A concurrency lease came back (when it was taken and how its work went matter to adaptive limits only). */
  releasePermits(slot: number, permits: number, _heldSince?: number, _outcome?: ReleaseOutcome): void {
    this.releases++;
    this.algorithm.give(this.table.states, slot * this.algorithm.width, permits);
    if (this.waiting > 0) this.drain(slot, this.options.clock.now());
  }

  /** Sets the one wake-up timer at the earliest time a waiter at the front of a queue could be served. */
  private arm(now: number): void {
    if (!this.algorithm.timeBased) return;
    let earliest = Number.POSITIVE_INFINITY;
    if (this.waiting > 0) {
      const algorithm = this.algorithm;
      const s = this.table.states;
      for (const queue of this.queues.values()) {
        const waiter = this.newestFirst ? queue.newest() : queue.head;
        if (!waiter) continue;
        const o = queue.slot * algorithm.width;
        const need = waiter.permits === 0 ? 1 : Math.min(waiter.permits, algorithm.limit);
        const wait = algorithm.retryAfter(s, o, now, need);
        if (now + wait < earliest) earliest = now + wait;
      }
    }
    if (earliest === this.timerAt) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = earliest;
    if (earliest === Number.POSITIVE_INFINITY) return;
    this.timer = setTimeout(() => this.wake(), Math.max(1, Math.ceil(earliest - now)));
  }

  private wake(): void {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.options.clock.now();
    for (const slot of [...this.queues.keys()]) this.drain(slot, now);
    this.arm(now);
  }
}

/** Builds a waiter. */
export function newWaiter(
  permits: number,
  now: number,
  resolve: (lease: Lease) => void,
  reject: (reason: unknown) => void,
  signal: AbortSignal | undefined,
  admit: CoreWaiter['admit'],
): CoreWaiter {
  return {
    permits,
    enqueuedAt: now,
    prev: undefined,
    next: undefined,
    queue: undefined,
    resolve,
    reject,
    signal,
    onAbort: undefined,
    admit,
    key: undefined,
    rank: DEFAULT_RANK,
  };
}

/** The waiter is leaving for good: stop listening to its signal. */
export function settle(waiter: CoreWaiter): void {
  if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
  waiter.onAbort = undefined;
}

/**
 * Charges `permits` to the partition `key` has now in `source` (a partitioned limiter), created if need be: the
 * partition a settled lease came from was dropped meanwhile. Nothing is charged when no partition can be had.
 */
function chargeKey(source: object | undefined, key: string | undefined, permits: number, now: number): void {
  // A memory limiter's `bind` (limiter.ts, which imports this file): a partition, or an answer when none.
  const limiter = source as { bind?(key: string | undefined, permits: number): object } | undefined;
  const bound = limiter?.bind?.(key, 0) as { core?: unknown; slot?: number } | undefined;
  if (!(bound?.core instanceof LimiterCore) || bound.slot === undefined) return;
  bound.core.settleIn(bound.slot, 0, permits, 0, now);
}

function nanToUndefined(value: number): number | undefined {
  return Number.isNaN(value) ? undefined : value;
}

/**
 * Takes `waiter` out of whichever queue holds it when its signal aborts (a chain may have moved it to another
 * core's queue), rejects it with the signal's reason, and serves that queue: the waiter may have blocked the head
 * of the line. Listens once per waiter.
 */
export function listenForAbort(waiter: CoreWaiter): void {
  if (!waiter.signal || waiter.onAbort) return;
  const signal = waiter.signal;
  waiter.onAbort = () => {
    const current = waiter.queue as WaitQueue<CoreWaiter> | undefined;
    if (!current) return;
    const owner = current.owner as LimiterCore;
    owner.unqueue(current, waiter);
    waiter.reject(signal.reason);
    owner.drain(current.slot, owner.options.clock.now());
  };
  signal.addEventListener('abort', waiter.onAbort, { once: true });
}
