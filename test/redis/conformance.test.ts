/**
 * The memory store's algorithm tables (test/limiters/*-window/token-bucket), run against the Redis store: each
 * call goes to both, on one clock, and every lease field must be equal; the tables' own assertions run too.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  type ChainLease,
  chain,
  concurrency,
  fixedWindow,
  partitioned,
  slidingWindow,
  tokenBucket,
} from '../../src/index.ts';
import { fields, leaseOption, same, startStore, Twin, uniqueName } from './twin.ts';

let env: Awaited<ReturnType<typeof startStore>>;
before(async () => {
  env = await startStore();
});
after(() => env.stop());

test('fixed window: permitLimit per window, then the time left in the window', async () => {
  const { store, clock } = env;
  clock.set(0);
  const limiter = new Twin(store, () => fixedWindow({ permitLimit: 3, window: '1s', clock }));
  const leases = [];
  for (let i = 0; i < 4; i++) leases.push(await limiter.tryAcquire());
  assert.deepEqual(
    leases.map((l) => [l.granted, l.remaining]),
    [
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ],
  );
  assert.equal(leases[3].reason, 'limit');
  assert.equal(leases[3].retryAfterMs, 1000);
  assert.equal(leases[0].resetAfterMs, 1000);
});

test('fixed window: retryAfterMs at every point of a window', async () => {
  const { store, clock } = env;
  clock.set(0);
  const limiter = new Twin(store, () => fixedWindow({ permitLimit: 2, window: 500, clock }));
  for (let window = 0; window < 3; window++) {
    const start = window * 500;
    clock.set(start);
    assert.ok((await limiter.tryAcquire(2)).granted, '(await limiter.tryAcquire(2)).granted');
    for (let t = start; t < start + 500; t += 7) {
      clock.set(t);
      const lease = await limiter.tryAcquire();
      assert.equal(lease.retryAfterMs, start + 500 - t, `t=${t}`);
    }
  }
});

test('fixed window: exact multiples from t = 0 after a million windows', async () => {
  const { store, clock } = env;
  clock.set(100);
  const limiter = new Twin(store, () => fixedWindow({ permitLimit: 1, window: 1000, clock }));
  assert.ok((await limiter.tryAcquire()).granted, '(await limiter.tryAcquire()).granted');
  clock.set(100 + 1000 * 1_000_000 + 999);
  assert.ok((await limiter.tryAcquire()).granted, '(await limiter.tryAcquire()).granted');
  assert.equal((await limiter.tryAcquire()).retryAfterMs, 1);
  clock.advance(1);
  assert.ok((await limiter.tryAcquire()).granted, '(await limiter.tryAcquire()).granted');
});

test('fixed window: rejections consume nothing; countRejected charges them; probes', async () => {
  const { store, clock } = env;
  clock.set(0);
  const plain = new Twin(store, () => fixedWindow({ permitLimit: 2, window: 1000, clock }));
  await plain.tryAcquire(2);
  await plain.tryAcquire();
  assert.deepEqual(await plain.statistics(), { available: 0, queued: 0, granted: 1, rejected: 1 });
  const counting = new Twin(store, () =>
    fixedWindow({ permitLimit: 3, window: 1000, clock, countRejected: true }),
  );
  await counting.tryAcquire(2);
  assert.equal((await counting.tryAcquire(2)).granted, false);
  assert.equal((await counting.tryAcquire(1)).granted, false, 'the rejected 2 were charged');
  const probe = new Twin(store, () => fixedWindow({ permitLimit: 1, window: 1000, clock }));
  assert.equal((await probe.tryAcquire(0)).granted, true);
  await probe.tryAcquire(1);
  assert.equal((await probe.tryAcquire(0)).retryAfterMs, 1000);
  await probe.statistics();
});

test('asking for more than the limit is a RangeError, as in memory', async () => {
  const limiter = env.store.limiter(fixedWindow({ permitLimit: 3, window: 1000 }), { name: uniqueName() });
  await assert.rejects(() => limiter.tryAcquire(4), RangeError);
  await assert.rejects(() => limiter.tryAcquire(-1), RangeError);
  await assert.rejects(() => limiter.acquire(1.5), RangeError);
});

test('sliding window: permits come back when their segment leaves the window', async () => {
  const { store, clock } = env;
  clock.set(0);
  const limiter = new Twin(store, () =>
    slidingWindow({ permitLimit: 4, window: 2000, segmentsPerWindow: 4, clock }),
  );
  clock.set(300);
  assert.ok((await limiter.tryAcquire(2)).granted, '(await limiter.tryAcquire(2)).granted');
  clock.set(1200);
  assert.ok((await limiter.tryAcquire(2)).granted, '(await limiter.tryAcquire(2)).granted');
  clock.set(1999);
  assert.equal((await limiter.tryAcquire(1)).retryAfterMs, 1);
  assert.equal((await limiter.tryAcquire(3)).retryAfterMs, 1001);
  for (const [t, available] of [
    [2000, 2],
    [2999, 2],
    [3000, 4],
  ]) {
    clock.set(t);
    assert.equal((await limiter.statistics()).available, available, `t=${t}`);
  }
});

test('sliding window: exact retryAfterMs with fractional segments, and catch-up after idleness', async () => {
  const { store, clock } = env;
  clock.set(0);
  const limiter = new Twin(store, () =>
    slidingWindow({ permitLimit: 2, window: 1000, segmentsPerWindow: 10, clock }),
  );
  clock.set(50);
  await limiter.tryAcquire();
  clock.set(430);
  await limiter.tryAcquire();
  for (let t = 430; t < 1000; t += 13) {
    clock.set(t);
    assert.equal((await limiter.tryAcquire()).retryAfterMs, 1000 - t);
    assert.equal((await limiter.tryAcquire(2)).retryAfterMs, 1400 - t);
  }
  clock.set(0);
  const thirds = new Twin(store, () =>
    slidingWindow({ permitLimit: 3, window: 1000, segmentsPerWindow: 3, clock }),
  );
  for (const t of [0, 100, 333, 334, 666, 667, 1000, 1333, 1334, 5000, 100 * 1_000_001 + 50]) {
    clock.set(t);
    await thirds.tryAcquire(1);
    await thirds.tryAcquire(2);
    await thirds.statistics();
  }
});

test('token bucket: stepped and continuous', async () => {
  const { store, clock } = env;
  clock.set(0);
  const stepped = new Twin(store, () =>
    tokenBucket({ tokenLimit: 5, tokensPerPeriod: 2, period: '100ms', clock }),
  );
  assert.ok((await stepped.tryAcquire(5)).granted, '(await stepped.tryAcquire(5)).granted');
  clock.set(99);
  assert.equal((await stepped.tryAcquire(3)).retryAfterMs, 101);
  assert.equal((await stepped.tryAcquire(1)).retryAfterMs, 1);
  clock.set(100);
  assert.equal((await stepped.statistics()).available, 2);
  clock.set(10_000_000);
  assert.equal((await stepped.statistics()).available, 5);
  clock.set(0);
  const smooth = new Twin(store, () =>
    tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 100, replenishment: 'continuous', clock }),
  );
  assert.ok((await smooth.tryAcquire(10)).granted, '(await smooth.tryAcquire(10)).granted');
  clock.set(30);
  const lease = await smooth.tryAcquire(1);
  assert.ok(Math.abs(lease.retryAfterMs! - 70) < 1e-6, 'a fractional retryAfterMs survives the trip');
  clock.set(100);
  assert.ok((await smooth.tryAcquire(1)).granted, '(await smooth.tryAcquire(1)).granted');
  clock.set(350);
  assert.equal((await smooth.statistics()).available, 2);
  await smooth.tryAcquire(3);
});

test('concurrency: held permits come back on release; rejections carry no retryAfterMs', async () => {
  const { store, clock } = env;
  const limiter = new Twin(store, () => concurrency({ permitLimit: 2, clock }));
  const a = await limiter.tryAcquire(2);
  const memoryA = limiter.lastMemoryLease!;
  const rejected = await limiter.tryAcquire(1);
  assert.equal(rejected.granted, false);
  assert.equal(rejected.retryAfterMs, undefined);
  a.release();
  a.release(); // idempotent
  memoryA.release();
  await limiter.statistics();
  assert.equal((await limiter.tryAcquire(2)).granted, true);
  assert.equal((await limiter.tryAcquire(1)).granted, false);
});

test('chain: a rejection by a later member consumes nothing; the longest wait is reported', async () => {
  const { store, clock } = env;
  clock.set(0);
  const make = () =>
    [
      fixedWindow({ permitLimit: 5, window: 1000, clock }),
      tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: 300, clock }),
    ] as const;
  const [m1, m2] = make();
  const [r1, r2] = make();
  const memory = chain(m1, m2);
  const redis = store.chain(
    store.limiter(r1, { name: uniqueName(), ...leaseOption(r1) }),
    store.limiter(r2, { name: uniqueName(), ...leaseOption(r2) }),
  );
  for (let i = 0; i < 4; i++) await same(redis.tryAcquire(), memory.tryAcquire(), `request ${i}`);
  clock.set(150);
  const lease = await same(redis.tryAcquire(2), memory.tryAcquire(2), 'two at 150');
  assert.equal(lease.granted, false);
  clock.set(300);
  for (let i = 0; i < 3; i++) await same(redis.tryAcquire(), memory.tryAcquire(), `request at 300 #${i}`);
  const stats = await redis.statistics();
  assert.deepEqual(
    { available: stats.available, granted: stats.granted, rejected: stats.rejected },
    (({ available, granted, rejected }) => ({ available, granted, rejected }))(memory.statistics()),
  );
  assert.deepEqual(fields(await redis.tryAcquire(0)), fields(memory.tryAcquire(0)), 'probe');
});

test('leases name their partition key as in memory: partitioned, queued, and each member of a chain', async () => {
  const { store, clock } = env;
  clock.set(0);
  const spec = () => fixedWindow({ permitLimit: 1, window: 1000, queueLimit: 1, clock });
  const memoryPart = partitioned({ key: (ip: string) => `ip:${ip}`, limiter: spec() });
  const redisPart = store.partitioned({
    name: uniqueName(),
    key: (ip: string) => `ip:${ip}`,
    limiter: spec(),
    ...leaseOption(spec()),
  });
  const first = await same(redisPart.tryAcquire('1.2.3.4'), memoryPart.tryAcquire('1.2.3.4'), 'granted');
  assert.equal(first.key, 'ip:1.2.3.4');
  await same(redisPart.tryAcquire('1.2.3.4'), memoryPart.tryAcquire('1.2.3.4'), 'rejected');
  assert.equal((await redisPart.acquire('5.6.7.8')).key, 'ip:5.6.7.8', 'acquire');
  const global = () => fixedWindow({ permitLimit: 5, window: 1000, clock });
  const memory = chain(global(), memoryPart);
  const redis = store.chain(
    store.limiter(global(), { name: uniqueName(), ...leaseOption(global()) }),
    redisPart,
  );
  const rejected = await same(redis.tryAcquire('1.2.3.4'), memory.tryAcquire('1.2.3.4'), 'chain rejected');
  assert.equal((rejected as ChainLease).members[0].key, 'ip:1.2.3.4');
  const granted = await same(redis.tryAcquire('9.9.9.9'), memory.tryAcquire('9.9.9.9'), 'chain granted');
  assert.deepEqual(
    (granted as ChainLease).members.map((l) => l.key),
    [undefined, 'ip:9.9.9.9'],
  );
});
