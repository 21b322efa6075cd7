import { type Duration, describe } from '../duration.ts';
import type { AdaptiveAcquireOptions } from './adaptive-concurrency.ts';
import { type Clock, type CoreWaiter, newWaiter, settle } from './core.ts';
import { type ChainKeyState, type KeyState, tightest } from './key-state.ts';
import { keyFor } from './keyed.ts';
import { ChainLease, type Lease, unitOf } from './lease.ts';
import {
  isAnswer,
  isLimiter,
  type LimitShape,
  leaves,
  type MemoryLimiter,
  type MemorySlot,
  type SlotCore,
} from './limiter.ts';
import { sourceOf } from './memory-limiter.ts';
import { checkPermits } from './options.ts';
import { type Priority, rankOf } from './priority.ts';
import type { AcquireOptions, Statistics } from './rate-limiter.ts';
import type { MemoryStore } from './store.ts';
import type { WaitQueue } from './wait-queue.ts';

/** A chain's member: any limiter in memory (a chain among them is flattened into its members). */
type Member = MemoryLimiter;

/** What a partitioned member administers by key (a `partitioned` limiter's methods). */
interface KeyAdmin {
  state(key: string): KeyState | undefined;
  reset(key: string): void;
  lock(key: string, duration: Duration): void;
  unlock(key: string): void;
  charge(key: string, permits: number): void;
  giveBack(key: string, permits: number): void;
  lockedFor?(key: string, permits: number): Lease | undefined;
}

/** `member` as a {@link KeyAdmin} when it is partitioned and administers its keys. */
function admin(member: Member): KeyAdmin | undefined {
  const m = member as Member & Partial<KeyAdmin>;
  return m.keyOf !== undefined && typeof m.reset === 'function' ? (m as KeyAdmin) : undefined;
}

/**
 * The resource type a chain's partitioned members take (`void` when every member is a plain limiter). Structural,
 * so the Redis store's chain uses it too: a partitioned member is anything with a `keyOf(resource)`.
 */
export type ChainResource<M extends readonly unknown[]> = {
  [K in keyof M]: M[K] extends { readonly keyOf: (resource: infer R) => unknown }
    ? R
    : M[K] extends ChainLimiter<infer C>
      ? [C] extends [void]
        ? never
        : C
      : never;
}[number] extends infer U
  ? [U] extends [never]
    ? void
    : U
  : never;

/** A chain's `tryAcquire`/`statistics` arguments: the resource first when a member is partitioned. */
export type ChainArgs<R> = [R] extends [void] ? [permits?: number] : [resource: R, permits?: number];
/** A chain's `tryAcquire` arguments: {@link ChainArgs} and the request's class. */
export type ChainTryArgs<R> = [R] extends [void]
  ? [permits?: number, priority?: Priority]
  : [resource: R, permits?: number, priority?: Priority];
/** A chain's `acquire` arguments. */
export type ChainAcquireArgs<R, O = AcquireOptions> = [R] extends [void]
  ? [permits?: number, options?: O]
  : [resource: R, permits?: number, options?: O];

/** The partitions one request binds to: a core, a slot and a partition key per member. */
type Binding = MemorySlot[];

/**
 * Several limiters decided as one, all-or-nothing. A rejected request consumes nothing from any member; a
 * request that waits does so in the queue of the member that said no, and is charged once, by every member, when
 * it is admitted. The caller sees the rejecting member's lease, with `retryAfterMs` the longest wait among the
 * members that are short.
 */
export class ChainLimiter<R = void> implements MemoryLimiter {
  /** Its members, every chain among them flattened into its own members, in order. */
  readonly members: readonly Member[];
  private readonly needsResource: boolean;
  /**
   * When some members count cost and others requests (`unit`): true for each member that counts requests, which
   * takes one permit per request whatever the estimate. Undefined when every member counts alike (and takes the
   * permits asked).
   */
  private readonly oneEach: readonly boolean[] | undefined;

  constructor(members: readonly (Member | ChainLimiter<never>)[]) {
    if (members.length === 0) throw new TypeError('chain: needs at least one limiter; got none');
    members.forEach((member, i) => {
      if (!isLimiter(member) || !member.store.sync || typeof (member as Member).bind !== 'function') {
        throw new TypeError(
          `chain: member ${i} must be a limiter in memory (a limiter, a partitioned limiter, a chain); got ${describe(member)}`,
        );
      }
    });
    this.members = members.flatMap((m) => leaves(m)) as Member[];
    this.needsResource = this.members.some((m) => m.keyOf !== undefined);
    const requests = this.members.map((m) => unitOf(m) === 'requests');
    this.oneEach = requests.includes(true) && requests.includes(false) ? requests : undefined;
  }

  /** What member `i` is asked for when the chain is asked for `permits`. */
  private permitsOf(i: number, permits: number): number {
    return this.oneEach?.[i] && permits > 1 ? 1 : permits;
  }

  /** The store that decides it: its members' (memory). */
  get store(): MemoryStore {
    return this.members[0].store;
  }

  /** Never set: a chain is decided member by member (its members are what the headers describe). */
  get shape(): LimitShape | undefined {
    return undefined;
  }

  shapeFor(key: string): LimitShape {
    return this.members[0].shapeFor(key);
  }

  /** Whether any member may queue. */
  get mayQueue(): boolean {
    return this.members.some((m) => m.mayQueue);
  }

  /** Never called: a chain inside a chain is flattened into its members, which are bound instead. */
  bind(): MemorySlot | Lease {
    throw new Error('floodgate: a chain is flattened into its members');
  }

  /** Permits available now: the least among members (keyed by `key` for every partitioned one). */
  available(key: string | undefined): number {
    let least = Number.POSITIVE_INFINITY;
    for (const m of this.members) least = Math.min(least, m.available(m.keyOf ? key : undefined));
    return least;
  }

  /** {@link tryAcquire} as the contract asks it: the resource (or undefined), the permits, the request's class. */
  tryAcquireFor(resource: unknown, permits = 1, _refundable = true, priority?: Priority): Lease {
    const rank = priority === undefined ? undefined : rankOf('priority', priority);
    return this.tryAcquireRanked(resource, permits, rank);
  }

  /** {@link acquire} as the contract asks it. */
  acquireFor(resource: unknown, permits = 1, signal?: AbortSignal, priority?: Priority): Promise<Lease> {
    return this.acquireRanked(resource, permits, signal, priority);
  }

  /**
   * Decides now for every member, all or nothing, and never waits. The last argument, `priority`, is the
   * request's class, passed to every member (their queues serve higher classes first).
   */
  tryAcquire(...args: ChainTryArgs<R>): Lease {
    const [resource, permits] = this.split(args);
    // Read only when given: an argument past the end is a slow read in V8, and most callers give none.
    const at = this.needsResource ? 2 : 1;
    const priority = args.length > at ? (args[at] as Priority | undefined) : undefined;
    const rank = priority === undefined ? undefined : rankOf('priority', priority);
    return this.tryAcquireRanked(resource, permits, rank);
  }

  private tryAcquireRanked(resource: unknown, permits: number, rank: number | undefined): Lease {
    const binding = this.bindAll(resource, permits);
    if (!Array.isArray(binding)) return binding;
    const clock = binding[0].core.options.clock;
    const now = clock.now();
    const blocked = this.firstBlocked(binding, permits, -1, rank, clock, now);
    if (blocked >= 0) return this.rejection(binding, blocked, permits, 'limit', rank, clock, now);
    return this.commit(binding, permits, clock, now);
  }

  /**
   * Grants now if every member can; otherwise waits in the queue of a member that cannot, or rejects at once.
   * `options.priority` as for {@link tryAcquire}.
   */
  acquire(...args: ChainAcquireArgs<R, AdaptiveAcquireOptions>): Promise<Lease> {
    const [resource, permits, options] = this.splitAcquire(args);
    return this.acquireRanked(resource, permits, options?.signal, options?.priority);
  }

  private acquireRanked(
    resource: unknown,
    permits: number,
    signal: AbortSignal | undefined,
    priority: Priority | undefined,
  ): Promise<Lease> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    let binding: Binding | Lease;
    let rank: number | undefined;
    try {
      rank = priority === undefined ? undefined : rankOf('priority', priority);
      binding = this.bindAll(resource, permits);
    } catch (error) {
      return Promise.reject(error);
    }
    if (!Array.isArray(binding)) return Promise.resolve(binding);
    const bound = binding;
    const clock = bound[0].core.options.clock;
    const at = clock.now();
    const blocked = this.firstBlocked(bound, permits, -1, rank, clock, at);
    if (blocked < 0) return Promise.resolve(this.commit(bound, permits, clock, at));
    return new Promise<Lease>((resolve, reject) => {
      const { core, slot } = bound[blocked];
      const now = timeOf(core, clock, at);
      const waiter = newWaiter(
        this.permitsOf(blocked, permits),
        now,
        resolve,
        reject,
        signal,
        (from, _slot, at) => this.admit(bound, waiter, permits, from, at),
      );
      if (rank !== undefined) waiter.rank = rank;
      if (core.enqueue === undefined || !core.enqueue(slot, waiter, now)) {
        resolve(this.rejection(bound, blocked, permits, fullReason(core), rank, clock, at));
      }
    });
  }

  /** Permits available (the least among members) and queued (summed), and grants and rejections summed. */
  statistics(...args: ChainArgs<R>): Statistics {
    const [resource] = this.split(args);
    const total: Statistics = { available: Number.POSITIVE_INFINITY, queued: 0, granted: 0, rejected: 0 };
    for (const member of this.members) {
      const keyed = member.keyOf === undefined ? undefined : resource;
      const own = member as Partial<{ statistics(resource?: unknown): Statistics }>;
      // A limiter of a user's own may keep no statistics: its permits available are all it tells.
      const stats =
        own.statistics === undefined
          ? {
              available: member.available(keyed === undefined ? undefined : keyFor(member as never, keyed)),
              queued: 0,
              granted: 0,
              rejected: 0,
            }
          : own.statistics(keyed);
      total.available = Math.min(total.available, stats.available);
      total.queued += stats.queued;
      total.granted += stats.granted;
      total.rejected += stats.rejected;
    }
    return total;
  }

  /**
   * `key`'s state in each partitioned member (the same key in each), and the tightest of them: see
   * {@link ChainKeyState}. Undefined when no member knows the key.
   */
  state(key: string): ChainKeyState | undefined {
    return tightest(this.members.map((m) => admin(m)?.state(key)));
  }

  /** Resets `key` in every partitioned member (see `PartitionedLimiter.reset`). */
  reset(key: string): void {
    for (const m of this.members) admin(m)?.reset(key);
  }

  /** Locks `key` in every partitioned member for `duration`: the chain rejects it with reason `'locked'`. */
  lock(key: string, duration: Duration): void {
    for (const m of this.members) admin(m)?.lock(key, duration);
  }

  /** Ends `key`'s lock in every partitioned member. */
  unlock(key: string): void {
    for (const m of this.members) admin(m)?.unlock(key);
  }

  /** Takes `permits` from `key` in every partitioned member, without a request. */
  charge(key: string, permits: number): void {
    for (const m of this.members) admin(m)?.charge(key, permits);
  }

  /** Gives `permits` back to `key` in every partitioned member, without a request. */
  giveBack(key: string, permits: number): void {
    for (const m of this.members) admin(m)?.giveBack(key, permits);
  }

  /** The lock a member has on its partition of `binding` now (a key locked while its request waited). */
  private lockedAt(binding: Binding, permits: number): Lease | undefined {
    for (let i = 0; i < binding.length; i++) {
      const key = binding[i].key;
      const locked = key === undefined ? undefined : admin(this.members[i])?.lockedFor?.(key, permits);
      if (locked !== undefined) return locked;
    }
    return undefined;
  }

  /** A waiter reached the front of `from`'s queue with permits there: admit it if every other member can too. */
  private admit(binding: Binding, waiter: CoreWaiter, permits: number, from: SlotCore, now: number): void {
    const queue = waiter.queue!;
    let index = -1;
    for (let i = 0; i < binding.length; i++) if (binding[i].core === from) index = index < 0 ? i : index;
    const clock = from.options.clock;
    const blocked = this.firstBlocked(binding, permits, index, waiter.rank, clock, now);
    from.unqueue?.(queue as WaitQueue<CoreWaiter>, waiter);
    const locked = this.lockedAt(binding, waiter.permits);
    if (locked !== undefined) {
      settle(waiter);
      waiter.resolve(locked);
      return;
    }
    if (blocked >= 0) {
      // Wait on the member that is short now; it still holds nothing, so nothing is charged twice.
      const { core, slot } = binding[blocked];
      waiter.permits = this.permitsOf(blocked, permits);
      if (core.enqueue?.(slot, waiter, now)) return;
      settle(waiter);
      waiter.resolve(this.rejection(binding, blocked, permits, fullReason(core), waiter.rank, clock, now));
      return;
    }
    settle(waiter);
    waiter.resolve(this.commit(binding, permits, clock, now));
  }

  /**
   * The first member that cannot grant now, or −1. `clock` and `now` are one reading for the whole decision
   * (see {@link timeOf}), taken here when not given.
   */
  private firstBlocked(
    binding: Binding,
    permits: number,
    skip: number,
    rank: number | undefined,
    clock = binding[0].core.options.clock,
    now = clock.now(),
  ): number {
    for (let i = 0; i < binding.length; i++) {
      const { core, slot } = binding[i];
      if (i !== skip && !core.canGrant(slot, this.permitsOf(i, permits), timeOf(core, clock, now), rank)) {
        return i;
      }
    }
    return -1;
  }

  private commit(
    binding: Binding,
    permits: number,
    clock = binding[0].core.options.clock,
    now = clock.now(),
  ): Lease {
    const leases: Lease[] = new Array(binding.length);
    let decisive = 0;
    for (let i = 0; i < binding.length; i++) {
      const { core, slot, key } = binding[i];
      leases[i] = core.commit(slot, this.permitsOf(i, permits), timeOf(core, clock, now), true, key);
      if (leases[i].remaining < leases[decisive].remaining) decisive = i;
    }
    return new ChainLease(leases[decisive], undefined, leases, undefined);
  }

  private rejection(
    binding: Binding,
    index: number,
    permits: number,
    reason: string,
    rank: number | undefined,
    clock = binding[0].core.options.clock,
    at = clock.now(),
  ): Lease {
    const rejecting = binding[index];
    const lease = rejecting.core.reject(
      rejecting.slot,
      this.permitsOf(index, permits),
      timeOf(rejecting.core, clock, at),
      reason,
      rank,
      rejecting.key,
    );
    // The chain can grant only when every member can: the longest known wait is the honest one.
    let retry = lease.retryAfterMs;
    for (let i = 0; i < binding.length; i++) {
      if (i === index) continue;
      const { core, slot } = binding[i];
      const now = timeOf(core, clock, at);
      const asked = this.permitsOf(i, permits);
      if (core.canGrant(slot, asked, now, rank) || core.retryAfter === undefined) continue;
      const wait = core.retryAfter(slot, asked, now);
      if (!Number.isNaN(wait) && (retry === undefined || wait > retry)) retry = wait;
    }
    return new ChainLease(lease, retry, [lease], lease.source);
  }

  /** Each member's partition for `resource` (keyed once per member), or the answer of a member that has none. */
  private bindAll(resource: unknown, permits: number): Binding | Lease {
    const members = this.members;
    const binding: Binding = new Array(members.length);
    for (let i = 0; i < members.length; i++) {
      const member = members[i];
      const asked = this.permitsOf(i, permits);
      const bound = member.bind(
        member.keyOf === undefined ? undefined : keyFor(member as never, resource),
        asked,
      );
      if (isAnswer(bound)) return bound;
      checkPermits(asked, bound.core.algorithm.limit, bound.core.options.overdraw, sourceOf(bound.core));
      binding[i] = bound;
    }
    return binding;
  }

  private split(args: unknown[]): [unknown, number] {
    if (this.needsResource) return [args[0], (args[1] as number | undefined) ?? 1];
    return [undefined, (args[0] as number | undefined) ?? 1];
  }

  private splitAcquire(args: unknown[]): [unknown, number, AdaptiveAcquireOptions | undefined] {
    if (this.needsResource) {
      return [args[0], (args[1] as number | undefined) ?? 1, args[2] as AdaptiveAcquireOptions | undefined];
    }
    return [undefined, (args[0] as number | undefined) ?? 1, args[1] as AdaptiveAcquireOptions | undefined];
  }
}

/** Decides several limiters as one, all-or-nothing; a chain among them counts as its members. See {@link ChainLimiter}. */
export function chain<const M extends readonly Member[]>(...members: M): ChainLimiter<ChainResource<M>> {
  return new ChainLimiter(members);
}

/**
 * `core`'s time for a decision that read `clock` at `now`: that reading when `core` keeps the same clock (members
 * share the default one), else its own clock's. A chain decides at one instant: no window may end between one
 * member's check and another's charge, and a clock read (~200 instructions) is taken once, not twice a member.
 */
function timeOf(core: SlotCore, clock: Clock, now: number): number {
  return core.options.clock === clock ? now : core.options.clock.now();
}

function fullReason(core: SlotCore): string {
  return core.fullReason === undefined ? 'limit' : core.fullReason();
}
