import { describe } from '../duration.ts';
import type { AdaptiveAcquireOptions } from './adaptive-concurrency.ts';
import { type CoreWaiter, type LimiterCore, newWaiter, settle } from './core.ts';
import { ChainLease, type Lease } from './lease.ts';
import { checkPermits } from './options.ts';
import { PartitionedLimiter } from './partitioned.ts';
import { type Priority, rankOf } from './priority.ts';
import { type AcquireOptions, RateLimiter, type Statistics } from './rate-limiter.ts';
import type { WaitQueue } from './wait-queue.ts';

// biome-ignore lint/suspicious/noExplicitAny: a chain accepts partitioned limiters over any resource type
type Member = RateLimiter | PartitionedLimiter<any>;

/**
 * The resource type a chain's partitioned members take (`void` when every member is a plain limiter). Structural,
 * so the Redis store's chain uses it too: a partitioned member is anything with a `keyOf(resource)`.
 */
export type ChainResource<M extends readonly unknown[]> = {
  [K in keyof M]: M[K] extends { readonly keyOf: (resource: infer R) => unknown } ? R : never;
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

/** The partitions one request binds to: a core and a slot per member. */
interface Binding {
  cores: LimiterCore[];
  slots: number[];
  /** Each member's partition key (undefined for plain limiters), copied onto its lease. */
  keys: (string | undefined)[];
}

/**
 * Several limiters decided as one, all-or-nothing. A rejected request consumes nothing from any member; a
 * request that waits does so in the queue of the member that said no, and is charged once, by every member, when
 * it is admitted. The caller sees the rejecting member's lease, with `retryAfterMs` the longest wait among the
 * members that are short.
 */
export class ChainLimiter<R = void> {
  readonly members: readonly Member[];
  private readonly needsResource: boolean;

  constructor(members: readonly Member[]) {
    if (members.length === 0) throw new TypeError('chain: needs at least one limiter; got none');
    members.forEach((member, i) => {
      if (!(member instanceof RateLimiter) && !(member instanceof PartitionedLimiter)) {
        throw new TypeError(
          `chain: member ${i} must be a limiter or a partitioned limiter; got ${describe(member)}`,
        );
      }
    });
    this.members = members;
    this.needsResource = members.some((m) => m instanceof PartitionedLimiter);
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
    const binding = this.bind(resource, permits);
    if ('granted' in binding) return binding;
    const { cores, slots } = binding;
    for (let i = 0; i < cores.length; i++) {
      if (!cores[i].canGrant(slots[i], permits, cores[i].options.clock.now(), rank)) {
        return this.rejection(binding, i, permits, 'limit', rank);
      }
    }
    return this.commit(binding, permits);
  }

  /**
   * Grants now if every member can; otherwise waits in the queue of a member that cannot, or rejects at once.
   * `options.priority` as for {@link tryAcquire}.
   */
  acquire(...args: ChainAcquireArgs<R, AdaptiveAcquireOptions>): Promise<Lease> {
    const [resource, permits, options] = this.splitAcquire(args);
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    let binding: Binding | Lease;
    let rank: number | undefined;
    try {
      const priority = options?.priority;
      rank = priority === undefined ? undefined : rankOf('priority', priority);
      binding = this.bind(resource, permits);
    } catch (error) {
      return Promise.reject(error);
    }
    if ('granted' in binding) return Promise.resolve(binding);
    const bound = binding;
    const blocked = this.firstBlocked(bound, permits, -1, rank);
    if (blocked < 0) return Promise.resolve(this.commit(bound, permits));
    return new Promise<Lease>((resolve, reject) => {
      const core = bound.cores[blocked];
      const now = core.options.clock.now();
      const waiter = newWaiter(permits, now, resolve, reject, signal, (from, _slot, at) =>
        this.admit(bound, waiter, from, at),
      );
      if (rank !== undefined) waiter.rank = rank;
      if (!core.enqueue(bound.slots[blocked], waiter, now)) {
        resolve(this.rejection(bound, blocked, permits, core.fullReason(), rank));
      }
    });
  }

  /** Permits available (the least among members) and queued (summed), and grants and rejections summed. */
  statistics(...args: ChainArgs<R>): Statistics {
    const [resource] = this.split(args);
    const total: Statistics = { available: Number.POSITIVE_INFINITY, queued: 0, granted: 0, rejected: 0 };
    for (const member of this.members) {
      const stats = member instanceof RateLimiter ? member.statistics() : member.statistics(resource);
      total.available = Math.min(total.available, stats.available);
      total.queued += stats.queued;
      total.granted += stats.granted;
      total.rejected += stats.rejected;
    }
    return total;
  }

  /** A waiter reached the front of `from`'s queue with permits there: admit it if every other member can too. */
  private admit(binding: Binding, waiter: CoreWaiter, from: LimiterCore, now: number): void {
    const queue = waiter.queue!;
    const index = binding.cores.indexOf(from);
    const blocked = this.firstBlocked(binding, waiter.permits, index, waiter.rank);
    from.unqueue(queue as WaitQueue<CoreWaiter>, waiter);
    if (blocked >= 0) {
      // Wait on the member that is short now; it still holds nothing, so nothing is charged twice.
      const core = binding.cores[blocked];
      if (core.enqueue(binding.slots[blocked], waiter, now)) return;
      settle(waiter);
      waiter.resolve(this.rejection(binding, blocked, waiter.permits, core.fullReason(), waiter.rank));
      return;
    }
    settle(waiter);
    waiter.resolve(this.commit(binding, waiter.permits));
  }

  private firstBlocked(binding: Binding, permits: number, skip: number, rank: number | undefined): number {
    const { cores, slots } = binding;
    for (let i = 0; i < cores.length; i++) {
      if (i !== skip && !cores[i].canGrant(slots[i], permits, cores[i].options.clock.now(), rank)) return i;
    }
    return -1;
  }

  private commit(binding: Binding, permits: number): Lease {
    const { cores, slots } = binding;
    const leases: Lease[] = new Array(cores.length);
    let decisive = 0;
    for (let i = 0; i < cores.length; i++) {
      leases[i] = cores[i].commit(slots[i], permits, cores[i].options.clock.now());
      leases[i].key = binding.keys[i];
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
  ): Lease {
    const { cores, slots } = binding;
    const lease = cores[index].reject(slots[index], permits, cores[index].options.clock.now(), reason, rank);
    lease.key = binding.keys[index];
    // The chain can grant only when every member can: the longest known wait is the honest one.
    let retry = lease.retryAfterMs;
    for (let i = 0; i < cores.length; i++) {
      if (i === index) continue;
      const core = cores[i];
      const now = core.options.clock.now();
      if (core.canGrant(slots[i], permits, now, rank)) continue;
      const wait = core.algorithm.retryAfter(
        core.table.states,
        slots[i] * core.algorithm.width,
        now,
        permits || 1,
      );
      if (!Number.isNaN(wait) && (retry === undefined || wait > retry)) retry = wait;
    }
    return new ChainLease(lease, retry, [lease], lease.source);
  }

  private bind(resource: unknown, permits: number): Binding | Lease {
    const cores: LimiterCore[] = new Array(this.members.length);
    const slots: number[] = new Array(this.members.length);
    const keys: (string | undefined)[] = new Array(this.members.length);
    for (let i = 0; i < this.members.length; i++) {
      const member = this.members[i];
      if (member instanceof RateLimiter) {
        cores[i] = member.core;
        slots[i] = 0;
      } else {
        const code = member.bind(resource);
        if (code < 0) return member.overflowLease(member.boundKey, permits);
        keys[i] = member.boundKey;
        cores[i] = member.coreOf(code);
        slots[i] = code >>> 8;
      }
      checkPermits(permits, cores[i].algorithm.limit);
    }
    return { cores, slots, keys };
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

/** Decides several limiters as one, all-or-nothing. See {@link ChainLimiter}. */
export function chain<const M extends readonly Member[]>(...members: M): ChainLimiter<ChainResource<M>> {
  return new ChainLimiter(members);
}
