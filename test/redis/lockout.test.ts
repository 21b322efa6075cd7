/**
 * lockout() on real redis-server processes: the Lua twin decides exactly as memory under random failures,
 * successes and clock moves (plain, partitioned, chained with a fixed window); the lockout lives in Redis (a
 * second client, as another process or a restarted one, sees it); its key expires by TTL when nothing is left
 * to remember; Redis Cluster keys carry the partition's hash tag; an outage follows `onUnavailable`.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { chain, fixedWindow, type Lease, lockout, partitioned } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { clusterClients } from '../support/cluster-clients.ts';
import { RedisCluster } from '../support/redis-server.ts';
import { fields, startStore, type TestClock, uniqueName } from './twin.ts';

const RUNS = Number(process.env.FLOODGATE_REDIS_RUNS ?? 25);

let env: Awaited<ReturnType<typeof startStore>>;
before(async () => {
  env = await startStore();
});
after(() => env.stop());

const settings = fc.record({
  failures: fc.integer({ min: 1, max: 4 }),
  within: fc.integer({ min: 1, max: 20 }).map((x) => x * 10),
  lockFor: fc.integer({ min: 1, max: 10 }).map((x) => x * 10),
  factor: fc.constantFrom(1, 1.5, 2),
  extra: fc.integer({ min: 0, max: 40 }).map((x) => x * 10),
  memory: fc.integer({ min: 0, max: 20 }).map((x) => x * 10),
});
type Settings = typeof settings extends fc.Arbitrary<infer T> ? T : never;

function make(p: Settings, clock: TestClock) {
  return lockout({
    failures: p.failures,
    within: p.within,
    lockFor: p.lockFor,
    factor: p.factor,
    maxLockFor: p.lockFor + p.extra,
    memory: p.memory,
    clock,
  });
}

type Step = { op: 'attempt'; key: number } | { op: 'success'; pick: number } | { op: 'tick'; dt: number };
const steps = fc.array(
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({ op: fc.constant('attempt' as const), key: fc.integer({ min: 0, max: 1 }) }),
    },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('success' as const), pick: fc.nat() }) },
    {
      weight: 3,
      arbitrary: fc.record({
        op: fc.constant('tick' as const),
        dt: fc.oneof(
          fc.integer({ min: 0, max: 20 }).map((x) => x * 10),
          fc.integer({ min: 0, max: 300 }),
        ),
      }),
    },
  ),
  { maxLength: 60 },
);

/** Runs `steps` on both; fails on the first lease that differs. A success refunds both grants. */
async function compare(
  list: Step[],
  memory: (key: string) => Lease,
  redis: (key: string) => Promise<Lease>,
  clock: TestClock,
): Promise<void> {
  const open: [Lease, Lease][] = [];
  for (const [i, s] of list.entries()) {
    if (s.op === 'tick') clock.advance(s.dt);
    else if (s.op === 'success') {
      const pair = open.splice(s.pick % Math.max(1, open.length), 1)[0];
      pair?.[0].refund();
      pair?.[1].refund();
    } else {
      const key = `u${s.key}`;
      const remote = await redis(key);
      const local = memory(key);
      assert.deepEqual(fields(remote), fields(local), `step ${i} at t=${clock.now()} for ${key}`);
      if (local.granted) open.push([local, remote]);
    }
  }
}

test('the Lua twin decides as memory under random failures, successes and time (plain, partitioned, chained)', async () => {
  const { store, clock } = env;
  await fc.assert(
    fc.asyncProperty(
      settings,
      steps,
      fc.constantFrom('plain', 'partitioned', 'chain'),
      async (p, list, shape) => {
        clock.set(1000);
        if (shape === 'plain') {
          const memory = make(p, clock);
          const redis = store.limiter(make(p, clock), { name: uniqueName() });
          await compare(
            list,
            () => memory.tryAcquire(),
            () => redis.tryAcquire(),
            clock,
          );
        } else if (shape === 'partitioned') {
          const memory = partitioned({ key: (k: string) => k, limiter: make(p, clock) });
          const redis = store.partitioned({
            name: uniqueName(),
            key: (k: string) => k,
            limiter: make(p, clock),
          });
          await compare(
            list,
            (k) => memory.tryAcquire(k),
            (k) => redis.tryAcquire(k),
            clock,
          );
        } else {
          const ceiling = () => fixedWindow({ permitLimit: 5, window: 200, clock });
          const memory = chain(ceiling(), partitioned({ key: (k: string) => k, limiter: make(p, clock) }));
          const redis = store.chain(
            store.limiter(ceiling(), { name: uniqueName() }),
            store.partitioned({ name: uniqueName(), key: (k: string) => k, limiter: make(p, clock) }),
          );
          await compare(
            list,
            (k) => memory.tryAcquire(k),
            (k) => redis.tryAcquire(k),
            clock,
          );
        }
      },
    ),
    { numRuns: RUNS * 2 },
  );
});

test('the lockout lives in Redis: another client (another process, a restarted one) sees it and its growth', async () => {
  const { server, clock } = env;
  clock.set(5000);
  const name = uniqueName();
  const settings = { failures: 2, within: '1m', lockFor: '10s', factor: 2, maxLockFor: '1h', clock } as const;
  const first = new Redis({ port: server.port });
  const a = redisStore({ client: first, clock, timeoutMs: 2000 }).partitioned({
    name,
    key: (u: string) => u,
    limiter: lockout(settings),
  });
  await a.tryAcquire('alice');
  await a.tryAcquire('alice');
  first.disconnect(); // the process that counted is gone

  const second = new Redis({ port: server.port });
  try {
    const b = redisStore({ client: second, clock, timeoutMs: 2000 }).partitioned({
      name,
      key: (u: string) => u,
      limiter: lockout(settings),
    });
    clock.advance(4000);
    const refused = await b.tryAcquire('alice');
    assert.deepEqual([refused.reason, refused.retryAfterMs], ['locked', 6000]);
    clock.advance(6000);
    await b.tryAcquire('alice');
    await b.tryAcquire('alice');
    assert.equal(
      (await b.tryAcquire('alice')).retryAfterMs,
      20_000,
      'the second lockout grew, counted in Redis',
    );
  } finally {
    second.disconnect();
  }
});

test('its key expires by TTL once nothing is left to remember (lockout, then the memory period)', async () => {
  const { client, store, clock } = env;
  clock.set(1000);
  const name = uniqueName();
  const l = store.partitioned({
    name,
    key: (u: string) => u,
    limiter: lockout({
      failures: 1,
      within: '1m',
      lockFor: '10s',
      factor: 2,
      maxLockFor: '1m',
      memory: '30s',
      clock,
    }),
  });
  await l.tryAcquire('bob');
  const keys = await client.keys(`*${name}*`);
  assert.equal(keys.length, 1, JSON.stringify(keys));
  const ttl = await client.pttl(keys[0]);
  // The test clock's pad (600 000 ms, its time is not Redis's) on top of the lockout and its memory period.
  const pad = 600_000;
  assert.ok(
    ttl > pad + 40_000 - 1000 && ttl <= pad + 40_000,
    `PTTL ${ttl}: the lockout and the memory after it`,
  );
});

test('Redis unavailable: the lockout follows onUnavailable (fail-closed refuses, marked unavailable)', async () => {
  const dead = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  dead.on('error', () => {});
  try {
    const store = redisStore({
      client: dead,
      timeoutMs: 100,
      onUnavailable: 'fail-closed',
      onError: () => {},
    });
    const l = store.partitioned({
      name: uniqueName(),
      key: (u: string) => u,
      limiter: lockout({ failures: 5, within: '1m', lockFor: '1m' }),
    });
    const lease = await l.tryAcquire('carol');
    assert.equal(lease.granted, false);
    assert.equal(lease.reason, 'unavailable');
  } finally {
    dead.disconnect();
  }
});

test('Redis Cluster: each user’s lockout on its own hash-tagged key, locked in every master’s range', async () => {
  const cluster = await RedisCluster.start(3);
  try {
    for (const [clientName, connect] of Object.entries(clusterClients(() => cluster.nodes))) {
      const { client, close } = await connect();
      try {
        const l = redisStore({ client, timeoutMs: 3000 }).partitioned({
          name: uniqueName(),
          key: (u: string) => u,
          limiter: lockout({ failures: 2, within: '1m', lockFor: '1m' }),
        });
        const users = Array.from({ length: 12 }, (_, i) => `user-${i}`);
        await Promise.all(users.map((u) => l.tryAcquire(u)));
        await Promise.all(users.map((u) => l.tryAcquire(u)));
        const third = await Promise.all(users.map((u) => l.tryAcquire(u)));
        assert.deepEqual(
          third.map((x) => x.reason),
          users.map(() => 'locked'),
          clientName,
        );
      } finally {
        await close();
      }
    }
  } finally {
    await cluster.stop();
  }
});

test('cacheBlocked: a locked-out key is answered locally until the lockout ends, still as locked', async () => {
  const { client } = env;
  const store = redisStore({ client, cacheBlocked: true, timeoutMs: 2000 });
  const l = store.partitioned({
    name: uniqueName(),
    key: (u: string) => u,
    limiter: lockout({ failures: 1, within: '1m', lockFor: '1m' }),
  });
  assert.equal((await l.tryAcquire('dan')).granted, true);
  const first = await l.tryAcquire('dan');
  const calls = Number((await client.info('commandstats')).match(/cmdstat_fcall:calls=(\d+)/)?.[1] ?? 0);
  const cached = await l.tryAcquire('dan');
  const after = Number((await client.info('commandstats')).match(/cmdstat_fcall:calls=(\d+)/)?.[1] ?? 0);
  assert.deepEqual([first.reason, cached.reason], ['locked', 'locked']);
  assert.equal(after, calls, 'answered without Redis');
  assert.ok(cached.retryAfterMs! > 50_000 && cached.retryAfterMs! <= 60_000, String(cached.retryAfterMs));
});
