import type { Lease } from './lease.ts';

/**
 * Which store decides a limiter, and so how a chain of its limiters is decided. Every limiter names its store
 * (`limiter.store`); limiters of one route (or one chain) must share it, as only one store can decide a chain
 * atomically. The HTTP layer reads only this: a new store (Valkey GLIDE, a SQL database, an edge KV) plugs in by
 * giving its limiters a {@link RemoteStore}, without touching it.
 */
export type LimiterStore = MemoryStore | RemoteStore;

/** The process's memory: decisions and chains are synchronous (`ChainLimiter`), no fallback. */
export interface MemoryStore {
  readonly kind: 'memory';
  readonly sync: true;
}

/**
 * A store outside the process: every decision is a Promise, and a chain of its limiters is decided by the store
 * itself, all-or-nothing, in one round trip.
 */
export interface RemoteStore {
  /** What it is, for messages: `'Redis'`. */
  readonly kind: string;
  readonly sync: false;
  /**
   * The limiters `members` (all of this store, in order) decided as one all-or-nothing chain, one round trip per
   * decision; partitioned members are keyed by `resource`.
   */
  chain(members: readonly StoredMember[]): StoredChain;
  /**
   * Whether the store's fallback (Redis: `onUnavailable`) answered `lease` rather than the store itself: its
   * `metadata.fallback`.
   */
  isFallback(lease: Lease): boolean;
}

/**
 * How a remote store decides a chain of its limiters (or a lone one) for one resource. `rank` is the request's
 * class (see `priority.ts`), for members with priority classes; undefined: the default class.
 */
export interface StoredChain {
  tryAcquire(resource: unknown, permits: number, rank?: number): Promise<Lease>;
  acquire(resource: unknown, permits: number, signal: AbortSignal | undefined, rank?: number): Promise<Lease>;
}

/**
 * What a remote store reads of its own limiters when it chains them (the rest of the limiter contract,
 * `StoredLimiter`, is in `limiter.ts`).
 */
export interface StoredMember {
  readonly store: RemoteStore;
  /** The partition key of a resource, for a partitioned limiter. */
  // biome-ignore lint/suspicious/noExplicitAny: partitioned limiters take any resource type
  readonly keyOf?: ((resource: any) => string | PromiseLike<string>) | undefined;
}

/** The store of every memory limiter. */
export const MEMORY: MemoryStore = { kind: 'memory', sync: true };
