import type { Algorithm } from '../algorithms/algorithm.ts';
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
  chain(members: readonly StoredLimiter[]): StoredChain;
  /** Whether the store's fallback (Redis: `onUnavailable`) answered `lease` rather than the store itself. */
  isFallback(lease: Lease): boolean;
}

/** How a remote store decides a chain of its limiters (or a lone one) for one resource. */
export interface StoredChain {
  tryAcquire(resource: unknown, permits: number): Promise<Lease>;
  acquire(resource: unknown, permits: number, signal: AbortSignal | undefined): Promise<Lease>;
}

/** What the HTTP layer needs of a limiter that lives on a remote store (plain or partitioned). */
export interface StoredLimiter {
  readonly store: RemoteStore;
  /** The partition key of a resource, for a partitioned limiter. */
  // biome-ignore lint/suspicious/noExplicitAny: partitioned limiters take any resource type
  readonly keyOf?: ((resource: any) => string | PromiseLike<string>) | undefined;
  /** Its settings: the same for every key, or undefined when chosen per key (then see `algorithmFor`). */
  readonly spec:
    | { readonly algorithm: Algorithm; readonly options: { readonly queueLimit: number } }
    | undefined;
  /** The algorithm deciding `key`'s partition (a partitioned limiter). */
  algorithmFor?(key: string): Algorithm;
}

/** A chain of a remote store's limiters, as that store builds it (`store.chain(a, b)`). */
export interface StoredLimiterChain {
  readonly store: RemoteStore;
  readonly members: readonly StoredLimiter[];
}

/** The store of every memory limiter. */
export const MEMORY: MemoryStore = { kind: 'memory', sync: true };

/** Whether `value` is a limiter (or a chain) of a remote store. */
export function isStored(value: unknown): value is StoredLimiter | StoredLimiterChain {
  const store = (value as { store?: Partial<RemoteStore> } | null)?.store;
  return (
    typeof store === 'object' &&
    store !== null &&
    store.sync === false &&
    typeof store.chain === 'function' &&
    typeof store.isFallback === 'function'
  );
}
