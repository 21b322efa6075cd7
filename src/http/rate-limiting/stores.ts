import type { Lease } from '../../limiters/lease.ts';
import { RedisChainLimiter } from '../../redis/chain.ts';
import { type Context, RedisLimiter, RedisPartitionedLimiter } from '../../redis/limiters.ts';
import type { Member } from './options.ts';

/**
 * Routes whose limiters live on a Redis store. A route's global limiter and policy are one all-or-nothing chain
 * (behaviour.md §3); only one store can decide a chain atomically (memory under one synchronous call, Redis in
 * one script call), so every limiter of a route must be on the same store, checked when the route is built.
 */

/** How a route on a Redis store decides: one round trip per decision, a chain included. */
export interface RemoteDecider {
  tryAcquire(resource: unknown): Promise<Lease>;
  acquire(resource: unknown, signal: AbortSignal | undefined): Promise<Lease>;
}

type RedisMember = RedisLimiter | RedisPartitionedLimiter<unknown>;

/** Whether `member` is a Redis store's limiter. */
export function isRemote(member: Member): member is RedisMember {
  return member instanceof RedisLimiter || member instanceof RedisPartitionedLimiter;
}

/**
 * Throws a `TypeError` naming the limiters when `members` are not all on one store (memory counts as one).
 * `names` are the members' header/metric names, `where` the option or call being checked.
 */
export function checkOneStore(where: string, members: readonly Member[], names: readonly string[]): void {
  const first = storeOf(members[0]);
  for (let i = 1; i < members.length; i++) {
    const store = storeOf(members[i]);
    if (store === first) continue;
    const kinds =
      first === undefined || store === undefined
        ? `${describeStore(first, names[0])} and ${describeStore(store, names[i])}`
        : `${JSON.stringify(names[0])} and ${JSON.stringify(names[i])} are on two different Redis stores`;
    throw new TypeError(
      `${where}: ${kinds}, but a route's limiters (the global limiter and its policy) are decided as one ` +
        'all-or-nothing chain, which cannot be atomic across stores. Put them on one store ' +
        '(a local pre-filter in front of Redis belongs in a separate middleware).',
    );
  }
}

/** The decider of a route whose members are all on one Redis store: the store's chain, built once. */
export function remoteDecider(members: readonly RedisMember[]): RemoteDecider {
  if (members.length === 1) {
    const only = members[0];
    if (only instanceof RedisLimiter) {
      return {
        tryAcquire: () => only.tryAcquire(1),
        acquire: (_req, signal) => only.acquire(1, { signal }),
      };
    }
    return {
      tryAcquire: (req) => only.tryAcquire(req, 1),
      acquire: (req, signal) => only.acquire(req, 1, { signal }),
    };
  }
  // Same as `store.chain(...members)`: the members' shared context is their store.
  if (members.some((m) => m instanceof RedisPartitionedLimiter)) {
    const chain = new RedisChainLimiter<unknown>(members[0].context, members);
    return {
      tryAcquire: (req) => chain.tryAcquire(req, 1),
      acquire: (req, signal) => chain.acquire(req, 1, { signal }),
    };
  }
  // Without a partitioned member the chain takes no resource: its first argument is the permits.
  const chain = new RedisChainLimiter<void>(members[0].context, members);
  return {
    tryAcquire: () => chain.tryAcquire(1),
    acquire: (_req, signal) => chain.acquire(1, { signal }),
  };
}

function storeOf(member: Member): Context | undefined {
  return isRemote(member) ? member.context : undefined;
}

function describeStore(store: Context | undefined, name: string): string {
  return `${JSON.stringify(name)} is ${store === undefined ? 'in memory' : 'on a Redis store'}`;
}
