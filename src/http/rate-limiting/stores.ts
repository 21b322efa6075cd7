import type { Lease } from '../../limiters/lease.ts';
import type { StoredLimiter } from '../../limiters/limiter.ts';
import type { LimiterStore } from '../../limiters/store.ts';
import type { Member } from './options.ts';

/**
 * Routes whose limiters live on a remote store (Redis…). A route's global limiter and policy are one
 * all-or-nothing chain (behaviour.md §3); only one store can decide a chain atomically (memory under one
 * synchronous call, a remote store in one round trip), so every limiter of a route must be on the same store,
 * checked when the route is built. Only the limiters' store contract (`limiter.store`) is read here.
 */

/** How a route on a remote store decides: one round trip per decision, a chain included. */
export interface RemoteDecider {
  /** `rank`: the request's class (a policy's `priority`), for members with priority classes. */
  tryAcquire(resource: unknown, rank: number | undefined): Promise<Lease>;
  acquire(resource: unknown, signal: AbortSignal | undefined, rank: number | undefined): Promise<Lease>;
  /** Whether the store's fallback (`onUnavailable`) answered `lease`, not the store. */
  isFallback(lease: Lease): boolean;
}

/** Whether `member` is a remote store's limiter. */
export function isRemote(member: Member): member is StoredLimiter {
  return !member.store.sync;
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
      first.sync || store.sync
        ? `${describeStore(first, names[0])} and ${describeStore(store, names[i])}`
        : `${JSON.stringify(names[0])} and ${JSON.stringify(names[i])} are on two different ${first.kind === store.kind ? `${first.kind} stores` : 'stores'}`;
    throw new TypeError(
      `${where}: ${kinds}, but a route's limiters (the global limiter and its policy) are decided as one ` +
        'all-or-nothing chain, which cannot be atomic across stores. Put them on one store ' +
        '(a local pre-filter in front of Redis belongs in a separate middleware).',
    );
  }
}

/** The decider of a route whose members are all on one remote store: the store's chain, built once. */
export function remoteDecider(members: readonly StoredLimiter[]): RemoteDecider {
  const store = members[0].store;
  const chain = store.chain(members);
  return {
    tryAcquire: (resource, rank) => chain.tryAcquire(resource, 1, rank),
    acquire: (resource, signal, rank) => chain.acquire(resource, 1, signal, rank),
    isFallback: (lease) => store.isFallback(lease),
  };
}

function storeOf(member: Member): LimiterStore {
  return member.store;
}

function describeStore(store: LimiterStore, name: string): string {
  return `${JSON.stringify(name)} is ${store.sync ? 'in memory' : `on a ${store.kind} store`}`;
}
