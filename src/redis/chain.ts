import { type Duration, describe } from '../duration.ts';
import type { ChainAcquireArgs, ChainArgs, ChainResource, ChainTryArgs } from '../limiters/chain.ts';
import { type ChainKeyState, tightest } from '../limiters/key-state.ts';
import { type Lease, unitOf } from '../limiters/lease.ts';
import type { LimitShape, StoredLimiter, StoredLimiterChain } from '../limiters/limiter.ts';
import type { Priority } from '../limiters/priority.ts';
import type { AcquireOptions, Statistics } from '../limiters/rate-limiter.ts';
import type { RemoteStore } from '../limiters/store.ts';
import { type Binding, type BoundMember, ranked } from './binding.ts';
import type { Context, RedisLimiter, RedisPartitionedLimiter } from './limiters.ts';

// biome-ignore lint/suspicious/noExplicitAny: a chain accepts partitioned limiters over any resource type
type Member = RedisLimiter | RedisPartitionedLimiter<any>;

/** The resource type a Redis chain's partitioned members take (`void` when every member is a plain limiter). */
export type RedisChainResource<M extends readonly Member[]> = ChainResource<M>;

/**
 * Several Redis limiters decided as one, all-or-nothing, in one script call: a rejected request consumes
 * nothing from any member, under any concurrency from any number of processes (the script runs atomically).
 * In Redis Cluster every member's key must be in one slot: give them the same hash tag.
 */
export class RedisChainLimiter<R = void> implements StoredLimiterChain {
  private readonly needsResource: boolean;

  /** @internal Use `store.chain(a, b, …)`. */
  constructor(
    private readonly context: Context,
    readonly members: readonly Member[],
  ) {
    if (members.length === 0) throw new TypeError('store.chain: needs at least one limiter; got none');
    members.forEach((member, i) => {
      // A Redis store's limiter (a chain is given as its members: `store.chain(...c.members)`). One of another
      // Redis store passes here; the route that uses the chain names both stores.
      const m = member as Partial<StoredLimiter> | null;
      if (
        m?.store?.kind !== context.store.kind ||
        m.members !== undefined ||
        typeof member.bind !== 'function'
      ) {
        throw new TypeError(
          `store.chain: member ${i} must be a limiter of this Redis store (store.limiter / store.partitioned); got ${describe(member)}`,
        );
      }
    });
    this.needsResource = members.some((m) => (m as StoredLimiter).keyOf !== undefined);
    // Each member takes the permits asked: a member counting requests beside one counting cost would need one
    // permit per request, which the scripts do not do yet.
    const units = [...new Set(members.map((m) => unitOf(m)))];
    if (units.length > 1) {
      throw new TypeError(
        `store.chain: its members count different units (${units.map((u) => JSON.stringify(u)).join(', ')}); on a Redis store every member of a chain counts the same unit (a chain mixing cost and requests runs in memory)`,
      );
    }
  }

  /** The store that decides it (a Redis store). */
  get store(): RemoteStore {
    return this.context.store;
  }

  /** Never set: a chain's members are what the headers describe. */
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

  /**
   * Decides every member now, all or nothing: one round trip. The last argument, `priority`, is the request's
   * class, for members with priority classes.
   */
  tryAcquire(...args: ChainTryArgs<R>): Promise<Lease> {
    let binding: Binding;
    let permits: number;
    try {
      const [resource, n] = this.split(args);
      permits = n;
      const priority = args[this.needsResource ? 2 : 1] as Priority | undefined;
      binding = ranked(this.bind(resource), priority);
      this.context.engine.check(binding, permits);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.context.engine.decideLease(binding, permits, 'limit');
  }

  /** Grants now if every member can; otherwise waits locally and asks again, or rejects at once. */
  async acquire(...args: ChainAcquireArgs<R>): Promise<Lease> {
    const [resource, permits] = this.split(args);
    const options = (this.needsResource ? args[2] : args[1]) as AcquireOptions | undefined;
    return this.context.waiting.acquire(
      ranked(this.bind(resource), options?.priority),
      permits,
      options?.signal,
    );
  }

  /** Permits available (the least among members), queued here, and this process's grants and rejections. */
  async statistics(...args: ChainArgs<R>): Promise<Statistics> {
    const [resource] = this.split(args);
    const binding = this.bind(resource);
    const available = await this.context.engine.peek(binding);
    let granted = 0;
    let rejected = 0;
    for (const m of this.members) {
      granted += m.granted;
      rejected += m.rejected;
    }
    return {
      available: Math.min(...available),
      queued: this.context.waiting.queued(binding),
      granted,
      rejected,
    };
  }

  /**
   * `key`'s state in each partitioned member (the same key in each) and the tightest of them (see
   * `ChainKeyState`); undefined when Redis holds it for none. The members' reads leave in one batch: one round
   * trip when their keys share a node (on Cluster they share a slot).
   */
  async state(key: string): Promise<ChainKeyState | undefined> {
    return tightest(await Promise.all(this.members.map((m) => partitionedOf(m)?.state(key))));
  }

  /** Resets `key` in every partitioned member: one round trip, as {@link state}. */
  async reset(key: string): Promise<void> {
    await Promise.all(this.members.map((m) => partitionedOf(m)?.reset(key)));
  }

  /** Locks `key` in every partitioned member for `duration`: the chain rejects it with reason `'locked'`. */
  async lock(key: string, duration: Duration): Promise<void> {
    await Promise.all(this.members.map((m) => partitionedOf(m)?.lock(key, duration)));
  }

  /** Ends `key`'s lock in every partitioned member. */
  async unlock(key: string): Promise<void> {
    await Promise.all(this.members.map((m) => partitionedOf(m)?.unlock(key)));
  }

  /** Takes `permits` from `key` in every partitioned member, without a request. */
  async charge(key: string, permits: number): Promise<void> {
    await Promise.all(this.members.map((m) => partitionedOf(m)?.charge(key, permits)));
  }

  /** Gives `permits` back to `key` in every partitioned member, without a request. */
  async giveBack(key: string, permits: number): Promise<void> {
    await Promise.all(this.members.map((m) => partitionedOf(m)?.giveBack(key, permits)));
  }

  private bind(resource: unknown): Binding {
    const members: BoundMember[] = new Array(this.members.length);
    let partKey: string | undefined;
    for (let i = 0; i < this.members.length; i++) {
      members[i] = this.members[i].bind(resource);
      partKey ??= members[i].partKey;
    }
    return { members, partKey, chain: true };
  }

  private split(args: unknown[]): [unknown, number] {
    if (this.needsResource) return [args[0], (args[1] as number | undefined) ?? 1];
    return [undefined, (args[0] as number | undefined) ?? 1];
  }
}

/** `member` when it is partitioned (it administers keys), else undefined. */
// biome-ignore lint/suspicious/noExplicitAny: a chain accepts partitioned limiters over any resource type
function partitionedOf(member: Member): RedisPartitionedLimiter<any> | undefined {
  // biome-ignore lint/suspicious/noExplicitAny: as above
  return (member as StoredLimiter).keyOf !== undefined ? (member as RedisPartitionedLimiter<any>) : undefined;
}
