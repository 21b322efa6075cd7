import type { AdaptiveConcurrency } from '../algorithms/adaptive-concurrency.ts';
import type { Limit } from '../algorithms/limits/limit.ts';
import type { PriorityClasses } from '../algorithms/priority-classes.ts';
import { type Attributes, telemetry } from '../telemetry.ts';
import { type CoreOptions, type CoreWaiter, LimiterCore, listenForAbort, newWaiter, settle } from './core.ts';
import type { EventLoopMonitor } from './event-loop.ts';
import { HeldLease, Lease, type RejectionReason, type ReleaseOutcome } from './lease.ts';
import { CRITICAL_RANK, className, DEFAULT_RANK } from './priority.ts';
import { SampleWindow } from './sample-window.ts';
import { WaitQueue } from './wait-queue.ts';

/** What an adaptive limiter decides with, validated. */
export interface AdaptiveSettings {
  readonly createLimit: () => Limit;
  readonly windowMs: number;
  readonly minSamples: number;
  readonly classes: PriorityClasses;
  readonly targetDelayMs: number;
  readonly intervalMs: number;
  /** Samples overlapping a stall it reports are not learnt from; undefined: every sample counts. */
  readonly monitor: EventLoopMonitor | undefined;
  /** The brake: above this event-loop delay (ms) or utilisation, only critical requests are admitted. */
  readonly maxEventLoopDelayMs: number;
  readonly maxEventLoopUtilization: number;
  readonly onLimitChange: ((limit: number, previous: number) => void) | undefined;
}

/** One partition's learning and its queue (which holds the classes, highest first). */
class SlotState {
  limit: Limit;
  window: SampleWindow;
  readonly queue: WaitQueue<CoreWaiter>;
  /** When the queue was last empty: a queue not empty for `intervalMs` is standing. */
  lastEmptyAt: number;
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  timerAt = Number.POSITIVE_INFINITY;

  constructor(settings: AdaptiveSettings, now: number, slot: number, owner: AdaptiveCore) {
    this.queue = new WaitQueue<CoreWaiter>(slot, owner);
    this.limit = settings.createLimit();
    this.window = new SampleWindow(settings.windowMs, settings.minSamples, now);
    this.lastEmptyAt = now;
  }
}

/**
 * The decision engine of an adaptive concurrency limiter (every partition of one spec shares it). It keeps the
 * {@link LimiterCore} contract that partitioned limiters and chains use, and replaces the queue: one queue per
 * class, served highest class first; a class admitted only under its ceiling (what `reserve` leaves it); a
 * full queue evicting the lowest class first; waiting bounded by queue delay (CoDel as in "Fail at Scale": at
 * most `intervalMs`, or `targetDelayMs` once the queue has been standing for `intervalMs`, when it also serves
 * newest first). Released leases feed the slot's {@link Limit}, whose output is written into the state.
 */
export class AdaptiveCore extends LimiterCore {
  declare readonly algorithm: AdaptiveConcurrency;
  private readonly slots: (SlotState | undefined)[] = [];
  /**
   * Whether limits go to the `floodgate.concurrency.limit` gauge: a plain limiter's limit (no attributes), or
   * the sum of a partitioned limiter's live partitions (`{ partitioned: true }`: never the key, which would make
   * one series per client).
   */
  gauge = false;
  gaugeAttributes: Attributes = {};

  constructor(
    algorithm: AdaptiveConcurrency,
    options: CoreOptions,
    readonly settings: AdaptiveSettings,
  ) {
    super(algorithm, options);
  }

  override allocate(now: number): number {
    const slot = super.allocate(now);
    const state = new SlotState(this.settings, now, slot, this);
    this.slots[slot] = state;
    this.table.states[slot * 2 + 1] = Math.floor(state.limit.limit);
    if (this.gauge) telemetry().concurrencyLimit.add(Math.floor(state.limit.limit), this.gaugeAttributes);
    return slot;
  }

  override free(slot: number): void {
    if (this.gauge) telemetry().concurrencyLimit.add(-this.limitOf(slot), this.gaugeAttributes);
    this.slots[slot] = undefined;
    super.free(slot);
  }

  /** The limit `slot` admits up to now. */
  limitOf(slot: number): number {
    return this.table.states[slot * 2 + 1];
  }

  /** Permits held in `slot` now. */
  heldOf(slot: number): number {
    return this.table.states[slot * 2];
  }

  override isIdle(slot: number, _now: number): boolean {
    return this.state(slot).queue.count === 0 && this.heldOf(slot) === 0;
  }

  override peek(slot: number, _now: number): { available: number; queued: number } {
    return {
      available: Math.max(0, this.limitOf(slot) - this.heldOf(slot)),
      queued: this.state(slot).queue.permits,
    };
  }

  override canGrant(slot: number, permits: number, now: number, rank = DEFAULT_RANK): boolean {
    return this.canGrantClass(slot, permits, rank, now);
  }

  /**
   * Whether `permits` of class `rank` could be granted to a new arrival now: held stays within the class's
   * ceiling, and nobody of this class or higher waits ahead.
   */
  canGrantClass(slot: number, permits: number, rank: number, _now: number): boolean {
    const need = permits === 0 ? 1 : permits;
    if (this.heldOf(slot) + need > this.settings.classes.ceiling(rank, this.limitOf(slot))) return false;
    if (permits === 0) return true;
    const top = this.state(slot).queue.topRank;
    return top === undefined || top < rank;
  }

  /** Whether the event-loop brake is on: only critical requests are let in. */
  braking(rank: number): boolean {
    const monitor = this.settings.monitor;
    if (monitor === undefined || rank >= CRITICAL_RANK) return false;
    return (
      monitor.delayMs() > this.settings.maxEventLoopDelayMs ||
      monitor.utilization() > this.settings.maxEventLoopUtilization
    );
  }

  override commit(slot: number, permits: number, now: number, _refundable = true, key?: string): Lease {
    const s = this.table.states;
    if (permits === 0) {
      const free = Math.max(0, s[slot * 2 + 1] - s[slot * 2]);
      return Lease.granted({ limit: s[slot * 2 + 1], remaining: free, source: this.source, key });
    }
    s[slot * 2] += permits;
    this.granted++;
    const held = s[slot * 2];
    const window = this.state(slot).window;
    if (held > window.maxInflight) window.maxInflight = held;
    const limit = s[slot * 2 + 1];
    return new HeldLease(limit, Math.max(0, limit - held), permits, this, slot, now, this.source, key);
  }

  override reject(
    slot: number,
    permits: number,
    now: number,
    reason: RejectionReason,
    rank = DEFAULT_RANK,
    key?: string,
  ): Lease {
    return this.rejectClass(slot, permits, rank, now, reason, key);
  }

  /** A rejected lease, counted as shed for class `rank`. */
  rejectClass(
    slot: number,
    permits: number,
    rank: number,
    now: number,
    reason: RejectionReason,
    key?: string,
  ): Lease {
    if (permits > 0) telemetry().concurrencyShed.add(1, { class: className(rank), reason });
    return super.reject(slot, permits, now, reason, undefined, key);
  }

  override tryAcquire(
    slot: number,
    permits: number,
    now: number,
    _refundable = true,
    rank = DEFAULT_RANK,
    key?: string,
  ): Lease {
    return this.tryAcquireClass(slot, permits, rank, now, key);
  }

  /** Decides now for class `rank`, never waits. */
  tryAcquireClass(slot: number, permits: number, rank: number, now: number, key?: string): Lease {
    if (this.braking(rank)) return this.rejectClass(slot, permits, rank, now, 'event-loop', key);
    if (this.canGrantClass(slot, permits, rank, now)) return this.commit(slot, permits, now, true, key);
    return this.rejectClass(slot, permits, rank, now, 'limit', key);
  }

  override acquire(
    slot: number,
    permits: number,
    signal: AbortSignal | undefined,
    key?: string,
    rank = DEFAULT_RANK,
  ): Promise<Lease> {
    return this.acquireClass(slot, permits, rank, signal, key);
  }

  /** Grants now for class `rank` if it can, else waits in the class's queue if there is room, else rejects. */
  acquireClass(
    slot: number,
    permits: number,
    rank: number,
    signal: AbortSignal | undefined,
    key?: string,
  ): Promise<Lease> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const now = this.options.clock.now();
    if (this.braking(rank))
      return Promise.resolve(this.rejectClass(slot, permits, rank, now, 'event-loop', key));
    if (this.canGrantClass(slot, permits, rank, now))
      return Promise.resolve(this.commit(slot, permits, now, true, key));
    return new Promise<Lease>((resolve, reject) => {
      const waiter = newWaiter(permits, now, resolve, reject, signal, undefined);
      waiter.key = key;
      waiter.rank = rank;
      if (!this.enqueue(slot, waiter, now)) {
        resolve(this.rejectClass(slot, permits, rank, now, this.fullReason(), key));
      }
    });
  }

  override enqueue(slot: number, waiter: CoreWaiter, now: number): boolean {
    const state = this.state(slot);
    const queue = state.queue;
    const limit = this.options.queueLimit;
    this.expire(slot, state, now);
    if ((waiter.permits === 0 ? 1 : waiter.permits) > limit) return false;
    // Make room by evicting the lowest class below this one, oldest first; within its own class only
    // newest-first evicts; nobody is evicted unless that makes room.
    if (queue.permits + waiter.permits > limit) {
      const lifo = this.options.queueOrder === 'newest-first';
      if (queue.permits - queue.permitsBelow(waiter.rank, lifo) + waiter.permits > limit) return false;
      while (queue.permits + waiter.permits > limit) this.evict(slot, queue.lowest()!, now, 'evicted');
    }
    if (queue.count === 0) state.lastEmptyAt = now;
    queue.push(waiter);
    this.queuedPermits += waiter.permits;
    this.waiting++;
    listenForAbort(waiter);
    this.armSlot(slot, state, now);
    return true;
  }

  override unqueue(queue: WaitQueue<CoreWaiter>, waiter: CoreWaiter): void {
    if (waiter.queue !== queue) return;
    const state = this.state(queue.slot);
    queue.remove(waiter);
    this.queuedPermits -= waiter.permits;
    this.waiting--;
    if (queue.count === 0) {
      state.lastEmptyAt = this.options.clock.now();
      if (state.timer !== undefined) clearTimeout(state.timer);
      state.timer = undefined;
      state.timerAt = Number.POSITIVE_INFINITY;
    }
  }

  override drain(slot: number, now: number): void {
    const state = this.state(slot);
    const queue = state.queue;
    this.expire(slot, state, now);
    const lifo = this.options.queueOrder === 'newest-first' || this.standing(state, now);
    for (;;) {
      const waiter = lifo ? queue.newest() : queue.head;
      if (waiter === undefined) break;
      const need = waiter.permits === 0 ? 1 : waiter.permits;
      if (this.heldOf(slot) + need > this.settings.classes.ceiling(waiter.rank, this.limitOf(slot))) break;
      if (waiter.admit) {
        waiter.admit(this, slot, now);
        if (waiter.queue === queue) break; // still blocked elsewhere
        continue;
      }
      this.unqueue(queue, waiter);
      settle(waiter);
      waiter.resolve(this.commit(slot, waiter.permits, now, true, waiter.key));
    }
    if (queue.count > 0) this.armSlot(slot, state, now);
  }

  override releasePermits(slot: number, permits: number, heldSince: number, outcome?: ReleaseOutcome): void {
    this.releases++;
    const now = this.options.clock.now();
    const s = this.table.states;
    s[slot * 2] -= permits;
    const state = this.state(slot);
    const monitor = this.settings.monitor;
    if (outcome?.ignore !== true && (monitor === undefined || !monitor.stalledSince(heldSince, now))) {
      state.window.add(now - heldSince, outcome?.dropped === true);
    }
    const window = state.window.close(now, s[slot * 2]);
    if (window !== undefined) {
      const previous = s[slot * 2 + 1];
      const next = Math.floor(state.limit.update(window));
      if (next !== previous) {
        s[slot * 2 + 1] = next;
        if (this.gauge) telemetry().concurrencyLimit.add(next - previous, this.gaugeAttributes);
        this.settings.onLimitChange?.(next, previous);
      }
    }
    if (state.queue.count > 0) this.drain(slot, now);
  }

  private state(slot: number): SlotState {
    return this.slots[slot]!;
  }

  private standing(state: SlotState, now: number): boolean {
    return state.queue.count > 0 && now - state.lastEmptyAt > this.settings.intervalMs;
  }

  /** Rejects waiters past their queue-delay bound ('queue-delay'), oldest of each class first. */
  private expire(slot: number, state: SlotState, now: number): void {
    const queue = state.queue;
    if (queue.count === 0) return;
    const bound = this.standing(state, now) ? this.settings.targetDelayMs : this.settings.intervalMs;
    for (let expired = true; expired; ) {
      expired = false;
      queue.firstOfEachClass((first) => {
        if (now - first.enqueuedAt <= bound) return;
        this.evict(slot, first, now, 'queue-delay');
        expired = true;
      });
    }
  }

  /** Takes `waiter` out and answers it with a rejection (a chain's waiter is answered by its own rejection). */
  private evict(slot: number, waiter: CoreWaiter, now: number, reason: RejectionReason): void {
    this.unqueue(waiter.queue as WaitQueue<CoreWaiter>, waiter);
    settle(waiter);
    waiter.resolve(
      this.rejectClass(slot, waiter.permits, waiter.rank ?? DEFAULT_RANK, now, reason, waiter.key),
    );
  }

  /** One timer per partition with waiters, at the next moment a waiter passes its queue-delay bound. */
  private armSlot(slot: number, state: SlotState, now: number): void {
    let earliest = Number.POSITIVE_INFINITY;
    const { intervalMs, targetDelayMs } = this.settings;
    const standingAt = state.lastEmptyAt + intervalMs;
    state.queue.firstOfEachClass((head) => {
      // Bounded by the interval until the queue stands, by the target after.
      const due = Math.min(
        head.enqueuedAt + intervalMs,
        Math.max(standingAt, head.enqueuedAt + targetDelayMs),
      );
      if (due < earliest) earliest = due;
    });
    if (earliest === state.timerAt) return;
    if (state.timer !== undefined) clearTimeout(state.timer);
    state.timer = undefined;
    state.timerAt = earliest;
    if (earliest === Number.POSITIVE_INFINITY) return;
    state.timer = setTimeout(
      () => {
        state.timer = undefined;
        state.timerAt = Number.POSITIVE_INFINITY;
        this.drain(slot, this.options.clock.now());
      },
      Math.max(1, Math.ceil(earliest - now) + 1),
    );
  }
}
