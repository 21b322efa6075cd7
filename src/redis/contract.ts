import type { Lease } from '../limiters/lease.ts';
import type { RemoteStore, StoredChain, StoredMember } from '../limiters/store.ts';
import { RedisChainLimiter } from './chain.ts';
import type { Context, RedisLimiter, RedisPartitionedLimiter } from './limiters.ts';
import { isUnavailableAnswer } from './unavailable.ts';

/**
 * A Redis store as its limiters name it (`limiter.store`): what the HTTP layer decides a route's chain with, in
 * one round trip, without knowing it is Redis.
 */
export class RedisStoreContract implements RemoteStore {
  readonly kind = 'Redis';
  readonly sync = false;

  constructor(private readonly context: Context) {}

  chain(members: readonly StoredMember[]): StoredChain {
    // The chain checks that every member is one of this store's limiters.
    const chain = new RedisChainLimiter<unknown>(this.context, members as never);
    if (members.length === 1) {
      // A lone limiter answers with its own lease, not a chain's.
      if (members[0].keyOf === undefined) {
        const only = members[0] as RedisLimiter;
        return {
          tryAcquire: (_resource, permits, rank) => only.tryAcquire(permits, rank),
          acquire: (_resource, permits, signal, rank) => only.acquire(permits, { signal, priority: rank }),
        };
      }
      const only = members[0] as RedisPartitionedLimiter<unknown>;
      return {
        tryAcquire: (resource, permits, rank) => only.tryAcquire(resource, permits, rank),
        acquire: (resource, permits, signal, rank) =>
          only.acquire(resource, permits, { signal, priority: rank }),
      };
    }
    if (members.some((m) => m.keyOf !== undefined)) {
      return {
        tryAcquire: (resource, permits, rank) => chain.tryAcquire(resource, permits, rank),
        acquire: (resource, permits, signal, rank) =>
          chain.acquire(resource, permits, { signal, priority: rank }),
      };
    }
    // Without a partitioned member the chain takes no resource: its first argument is the permits.
    const plain = chain as unknown as RedisChainLimiter<void>;
    return {
      tryAcquire: (_resource, permits, rank) => plain.tryAcquire(permits, rank),
      acquire: (_resource, permits, signal, rank) => plain.acquire(permits, { signal, priority: rank }),
    };
  }

  isFallback(lease: Lease): boolean {
    return isUnavailableAnswer(lease);
  }
}
