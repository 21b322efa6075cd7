import { keyFor } from './keyed.ts';
import type { Lease } from './lease.ts';
import { isAnswer, type LimitShape, type MemoryLimiter, type MemorySlot, type SlotCore } from './limiter.ts';
import { checkPermits } from './options.ts';
import { type Priority, rankOf } from './priority.ts';
import { MEMORY, type MemoryStore } from './store.ts';

/**
 * The base of every limiter decided in memory (.NET's template methods): a subclass says how a key binds to a
 * partition ({@link bind}), what its header fields say and how many permits are left; the checks of the
 * arguments, the asking of the core and the conversion of a throw into a rejected promise live here, once.
 * Extend it to write a limiter of your own: it then works in `chain` and as an HTTP policy.
 */
export abstract class MemoryLimiterBase implements MemoryLimiter {
  /** The store that decides it: this process's memory (decided synchronously). */
  get store(): MemoryStore {
    return MEMORY;
  }

  abstract readonly shape: LimitShape | undefined;
  abstract readonly mayQueue: boolean;
  abstract shapeFor(key: string): LimitShape;
  abstract bind(key: string | undefined, permits: number): MemorySlot | Lease;
  abstract available(key: string | undefined): number;

  /**
   * Decides now for the partition of `key` (undefined without partitions) and never waits. `refundable: false`
   * when the caller will never refund the lease; `priority` is the request's class, for cores with classes.
   */
  tryAcquireFor(key: string | undefined, permits = 1, refundable = true, priority?: Priority): Lease {
    const bound = this.bind(key, permits);
    if (isAnswer(bound)) return bound;
    return decideNow(bound.core, bound.slot, bound.key, permits, refundable, priority);
  }

  /**
   * Grants now, or waits in the partition's queue while there is room, or rejects at once. Never throws: a bad
   * argument rejects the promise.
   */
  acquireFor(
    key: string | undefined,
    permits = 1,
    signal?: AbortSignal,
    priority?: Priority,
  ): Promise<Lease> {
    return this.acquireOf(NO_RESOURCE, key, permits, signal, priority);
  }

  /**
   * {@link acquireFor} for a resource whose key is not computed yet (a partitioned limiter's `acquire`): the key
   * function runs inside the same conversion, so a key function that throws rejects the promise too.
   */
  protected acquireOf(
    resource: unknown,
    key: string | undefined,
    permits: number,
    signal: AbortSignal | undefined,
    priority: Priority | undefined,
  ): Promise<Lease> {
    try {
      const k = resource === NO_RESOURCE ? key : keyFor(this as never, resource);
      const bound = this.bind(k, permits);
      if (isAnswer(bound)) return Promise.resolve(bound);
      return decideLater(bound.core, bound.slot, bound.key, permits, signal, priority);
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

/** No resource given: the key is. */
const NO_RESOURCE = Symbol('no resource');

/** Decides now in `slot` of `core`; the commonest decision first, the rest out of line (the inlining budget). */
export function decideNow(
  core: SlotCore,
  slot: number,
  key: string | undefined,
  permits: number,
  refundable: boolean,
  priority: Priority | undefined,
): Lease {
  if (permits === 1 && priority === undefined) {
    if (refundable === true && core.decideOne !== undefined) return core.decideOne(slot, key);
    if (core.tryAcquire !== undefined) {
      return core.tryAcquire(slot, 1, core.options.clock.now(), refundable, undefined, key);
    }
  }
  return decideOther(core, slot, key, permits, refundable, priority);
}

/** {@link decideNow} of several permits, a class, or a core that decides in steps. */
function decideOther(
  core: SlotCore,
  slot: number,
  key: string | undefined,
  permits: number,
  refundable: boolean,
  priority: Priority | undefined,
): Lease {
  if (permits !== 1) checkPermits(permits, core.algorithm.limit, core.options.overdraw, sourceOf(core));
  const rank = priority === undefined ? undefined : rankOf('priority', priority);
  const now = core.options.clock.now();
  if (core.tryAcquire !== undefined) return core.tryAcquire(slot, permits, now, refundable, rank, key);
  if (core.canGrant(slot, permits, now, rank)) return core.commit(slot, permits, now, refundable, key);
  return core.reject(slot, permits, now, 'limit', rank, key);
}

/** Grants now, queues or rejects in `slot` of `core`; may throw (the caller turns it into a rejection). */
function decideLater(
  core: SlotCore,
  slot: number,
  key: string | undefined,
  permits: number,
  signal: AbortSignal | undefined,
  priority: Priority | undefined,
): Promise<Lease> {
  checkPermits(permits, core.algorithm.limit, core.options.overdraw, sourceOf(core));
  const rank = priority === undefined ? undefined : rankOf('priority', priority);
  if (core.acquire !== undefined) return core.acquire(slot, permits, signal, key, rank);
  if (signal?.aborted) return Promise.reject(signal.reason);
  const now = core.options.clock.now();
  if (core.canGrant(slot, permits, now, rank))
    return Promise.resolve(core.commit(slot, permits, now, true, key));
  return Promise.resolve(core.reject(slot, permits, now, 'limit', rank, key));
}

/** The limiter a core's leases name (a `LimiterCore`'s `source`), for the error of a request above its limit. */
export function sourceOf(core: SlotCore): object | undefined {
  const source = (core as { source?: unknown }).source;
  return typeof source === 'object' && source !== null ? source : undefined;
}
