import type { Clock, CoreWaiter } from './core.ts';
import type { Lease, RejectionReason } from './lease.ts';
import type { LimiterStore, MemoryStore, RemoteStore } from './store.ts';
import type { WaitQueue } from './wait-queue.ts';

/**
 * What a limiter's response header fields say about it (`RateLimit-Policy`: `q`, `w`, `qu`). Every built-in
 * algorithm is one.
 */
export interface LimitShape {
  /** The quota: the most permits in force (`q`). */
  readonly limit: number;
  /** The window or refill period in milliseconds (`w`), undefined when there is none (concurrency). */
  readonly windowMs: number | undefined;
  /** Whether permits come back with time (`requests`) rather than on release (`concurrent-requests`). */
  readonly timeBased: boolean;
}

/**
 * The contract every limiter implements — the four algorithms, `adaptiveConcurrency()`, `partitioned`, `chain`,
 * in memory or on a Redis store, and limiters of your own. It is all the HTTP layer and `chain` read: which store
 * decides the limiter (and so how a chain of its limiters is decided), whether it needs a resource, what its
 * header fields say, whether it can queue, and a chain's members.
 */
// biome-ignore lint/suspicious/noExplicitAny: a limiter's key function may take any resource type
export interface Limiter<R = any> {
  /**
   * The store that decides it. Limiters of one chain (or one HTTP route) must share it: memory decides a chain
   * synchronously through each member's {@link MemoryLimiter.bind}; a remote store decides it in one round trip
   * (`store.chain(members)`).
   */
  readonly store: LimiterStore;
  /** The partition key of a resource, for a limiter that needs one (partitioned); absent otherwise. */
  readonly keyOf?: ((resource: R) => string | PromiseLike<string>) | undefined;
  /** What its header fields say, when the same for every key; undefined when chosen per key (tiers). */
  readonly shape: LimitShape | undefined;
  /** What its header fields say for the partition of `key`. */
  shapeFor(key: string): LimitShape;
  /** Whether it may hold a request in a queue (then the HTTP layer asks with `acquire`, else `tryAcquire`). */
  readonly mayQueue: boolean;
  /**
   * What one permit is: `'requests'` when absent, or a cost unit (`'tokens'`…) whose grants are settled at their
   * real cost. A chain with a cost member asks a member counting requests for one permit per request.
   */
  readonly unit?: string;
  /** A chain's members (every chain inside it flattened), in order; absent for any other limiter. */
  readonly members?: readonly Limiter[] | undefined;
  /** Partitions live now, for a partitioned limiter in memory (the `partitions` metric follows it). */
  readonly size?: number;
}

/**
 * One partition of an in-memory limiter, bound for one decision: the core that decides it, the slot of its state
 * there, and the partition key its leases carry.
 */
export interface MemorySlot {
  readonly core: SlotCore;
  readonly slot: number;
  readonly key: string | undefined;
}

/**
 * What decides an in-memory limiter's partitions, step by step, so that a chain can check every member before it
 * charges any (all-or-nothing, in one synchronous step). `now` is read from `options.clock`.
 */
export interface SlotCore {
  /** `overdraw`: whether a request may ask for more than the limit (see `TimeOptions.overdraw`). */
  readonly options: { readonly clock: Clock; readonly overdraw?: boolean };
  /** The most permits one request may ask for. */
  readonly algorithm: { readonly limit: number };
  /** Whether `permits` could be granted in `slot` now (`rank`: the request's class, for cores with classes). */
  canGrant(slot: number, permits: number, now: number, rank?: number): boolean;
  /** Takes `permits` (checked with `canGrant` in this same step) and answers the granted lease. */
  commit(slot: number, permits: number, now: number, refundable?: boolean, key?: string): Lease;
  /** The rejected lease for `permits` in `slot` now. */
  reject(
    slot: number,
    permits: number,
    now: number,
    reason: RejectionReason,
    rank?: number,
    key?: string,
  ): Lease;
  /** Milliseconds until `permits` could be granted in `slot` (NaN when unknown); absent: unknown. */
  retryAfter?(slot: number, permits: number, now: number): number;
  /** Decides now in one step (absent: `canGrant`, then `commit` or `reject`). */
  tryAcquire?(
    slot: number,
    permits: number,
    now: number,
    refundable?: boolean,
    rank?: number,
    key?: string,
  ): Lease;
  /**
   * {@link tryAcquire} of the commonest request — one refundable permit, the default class — with the clock read
   * inside; absent: through `tryAcquire`.
   */
  decideOne?(slot: number, key: string | undefined): Lease;
  /** Grants now, or queues, or rejects; absent: a core that cannot queue. */
  acquire?(
    slot: number,
    permits: number,
    signal: AbortSignal | undefined,
    key?: string,
    rank?: number,
  ): Promise<Lease>;
  /** Queues `waiter` in `slot` if there is room (false: none); absent: a core that cannot queue. */
  enqueue?(slot: number, waiter: CoreWaiter, now: number): boolean;
  /** Takes `waiter` out of its queue here (a chain moving it to another member's queue). */
  unqueue?(queue: WaitQueue<CoreWaiter>, waiter: CoreWaiter): void;
  /** The reason a request that can neither be granted nor queued is given (default `'limit'`). */
  fullReason?(): RejectionReason;
}

/** A limiter decided in this process's memory, synchronously. */
export interface MemoryLimiter extends Limiter {
  readonly store: MemoryStore;
  /**
   * The partition of `key` (undefined for a limiter without partitions), created if new; or the answer already
   * when there is no partition to decide in (a partitioned limiter full of live partitions).
   */
  bind(key: string | undefined, permits: number): MemorySlot | Lease;
  /** Permits available now in the partition of `key`, for header fields of a member that did not decide. */
  available(key: string | undefined): number;
  /** Decides now for the partition of `key`, never waits (see `MemoryLimiterBase`, which implements it). */
  tryAcquireFor(key: string | undefined, permits?: number, refundable?: boolean, priority?: number): Lease;
  /** Grants now, or queues, or rejects at once; never throws (see `MemoryLimiterBase`). */
  acquireFor(
    key: string | undefined,
    permits?: number,
    signal?: AbortSignal,
    priority?: number,
  ): Promise<Lease>;
}

/** A limiter that lives on a remote store (plain or partitioned): decided through its store's `chain`. */
// biome-ignore lint/suspicious/noExplicitAny: as Limiter
export interface StoredLimiter<R = any> extends Limiter<R> {
  readonly store: RemoteStore;
}

/** A chain of a remote store's limiters, as that store builds it (`store.chain(a, b)`). */
// biome-ignore lint/suspicious/noExplicitAny: as Limiter
export interface StoredLimiterChain<R = any> extends Limiter<R> {
  readonly store: RemoteStore;
  readonly members: readonly StoredLimiter[];
}

/** Whether `value` is a limiter: anything that names its store and says what its header fields are. */
export function isLimiter(value: unknown): value is Limiter {
  const v = value as Partial<Limiter> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.store === 'object' &&
    v.store !== null &&
    typeof v.shapeFor === 'function' &&
    typeof v.mayQueue === 'boolean'
  );
}

/** Whether `bound` is an answer rather than a partition to decide in. */
export function isAnswer(bound: MemorySlot | Lease): bound is Lease {
  return (bound as Partial<MemorySlot>).core === undefined;
}

/** A chain's members with every chain inside flattened. */
export function leaves(limiter: Limiter): Limiter[] {
  const members = limiter.members;
  if (members === undefined) return [limiter];
  const out: Limiter[] = [];
  for (const member of members) for (const leaf of leaves(member)) out.push(leaf);
  return out;
}
