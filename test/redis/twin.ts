/**
 * Runs the same limiter in memory and through the Redis store on one hand-moved clock, and fails on the first
 * lease that differs: the memory tables become Redis conformance tables by awaiting each call.
 */
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import type { ChainLimiter, Lease, PartitionedLimiter, RateLimiter } from '../../src/index.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';

/** A clock moved by hand, without timers. */
export interface TestClock {
  now(): number;
  set(t: number): void;
  advance(ms: number): void;
}

export function testClock(start = 0): TestClock {
  let t = start;
  return {
    now: () => t,
    set: (to) => {
      t = to;
    },
    advance: (ms) => {
      t += ms;
    },
  };
}

/** The fields a lease is compared by. */
export function fields(lease: Lease): Record<string, unknown> {
  return {
    granted: lease.granted,
    reason: lease.reason,
    retryAfterMs: lease.retryAfterMs,
    limit: lease.limit,
    remaining: lease.remaining,
    resetAfterMs: lease.resetAfterMs,
    members: (lease as { members?: unknown[] }).members?.length,
    key: lease.key,
    memberKeys: (lease as { members?: Lease[] }).members?.map((m) => m.key),
  };
}

/** A server, a client and a store whose script clock is `clock` (whatever it is set to now). */
export async function startStore(): Promise<{
  server: RedisServer;
  client: Redis;
  store: RedisStore;
  clock: TestClock;
  stop(): Promise<void>;
}> {
  const server = await RedisServer.start();
  const client = new Redis({ port: server.port, lazyConnect: false });
  const current = testClock(0);
  const clock: TestClock = {
    now: () => current.now(),
    set: (t) => current.set(t),
    advance: (ms) => current.advance(ms),
  };
  const store = redisStore({ client, clock, timeoutMs: 5000 });
  return {
    server,
    client,
    store,
    clock,
    async stop() {
      client.disconnect();
      await server.stop();
    },
  };
}

let names = 0;
/** A unique limiter name per twin, so tests share one server without sharing state. */
export function uniqueName(): string {
  return `t${names++}`;
}

/**
 * The parity suite in lease mode (`conformance-leases.test.ts` sets it): every Redis limiter that can lease is made
 * with `leases: true`, and must answer as memory does all the same.
 */
export const LEASES = process.env.FLOODGATE_TEST_LEASES === '1';

/** `{ leases: true }` in lease mode for a spec that can lease (not `countRejected`), else nothing. */
export function leaseOption(spec: { options: { countRejected?: boolean } }): { leases?: true } {
  return LEASES && !spec.options.countRejected ? { leases: true } : {};
}

/** A memory limiter and its Redis twin, compared on every call. */
export class Twin {
  readonly memory: RateLimiter;
  readonly redis: ReturnType<RedisStore['limiter']>;
  /** The memory lease of the last call, to release alongside the Redis one. */
  lastMemoryLease: Lease | undefined;

  constructor(store: RedisStore, make: () => RateLimiter) {
    this.memory = make();
    const spec = make();
    this.redis = store.limiter(spec, { name: uniqueName(), ...leaseOption(spec as never) });
  }

  async tryAcquire(permits = 1): Promise<Lease> {
    const remote = await this.redis.tryAcquire(permits);
    const local = this.memory.tryAcquire(permits);
    assert.deepEqual(fields(remote), fields(local), `tryAcquire(${permits})`);
    this.lastMemoryLease = local;
    return remote;
  }

  async statistics(): Promise<{ available: number; granted: number; rejected: number }> {
    const remote = await this.redis.statistics();
    const local = this.memory.statistics();
    assert.deepEqual(
      { available: remote.available, granted: remote.granted, rejected: remote.rejected },
      { available: local.available, granted: local.granted, rejected: local.rejected },
      'statistics',
    );
    return remote;
  }
}

/** Compares a memory chain (or partitioned limiter) call with its Redis twin. */
export async function same(remote: Promise<Lease>, local: Lease, what: string): Promise<Lease> {
  const lease = await remote;
  assert.deepEqual(fields(lease), fields(local), what);
  return lease;
}

export type { ChainLimiter, PartitionedLimiter };
