import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { chain, concurrency, fixedWindow, partitioned, slidingWindow, tokenBucket } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';

test('one state per key, created on first use', () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({
    key: (ip: string) => ip,
    limiter: fixedWindow({ permitLimit: 2, window: 1000, clock }),
  });
  assert.ok(limiter.tryAcquire('a').granted);
  assert.ok(limiter.tryAcquire('a').granted);
  assert.equal(limiter.tryAcquire('a').granted, false);
  assert.ok(limiter.tryAcquire('b').granted);
  assert.equal(limiter.size, 2);
  assert.equal(limiter.statistics('a').available, 0);
  assert.equal(limiter.statistics('never-seen').available, 2);
  assert.equal(limiter.size, 2, 'statistics create no partition');
});

test("a partition's t = 0 is its first request", () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({
    key: (k: string) => k,
    limiter: fixedWindow({ permitLimit: 1, window: 1000, clock }),
  });
  clock.set(700);
  limiter.tryAcquire('late');
  clock.set(1500);
  assert.equal(limiter.tryAcquire('late').retryAfterMs, 200, 'its window runs 700 → 1700');
});

test('tiers: per-key options from a function, called once per new partition', () => {
  const clock = manualClock(0, false);
  const free = fixedWindow({ permitLimit: 1, window: 1000, clock });
  const paid = fixedWindow({ permitLimit: 3, window: 1000, clock });
  let calls = 0;
  const limiter = partitioned({
    key: (user: { id: string; plan: string }) => `${user.plan}:${user.id}`,
    limiter: (key) => {
      calls++;
      return key.startsWith('paid:') ? paid : free;
    },
  });
  const grants = (user: { id: string; plan: string }) =>
    [0, 1, 2, 3].filter(() => limiter.tryAcquire(user).granted).length;
  assert.equal(grants({ id: '1', plan: 'free' }), 1);
  assert.equal(grants({ id: '2', plan: 'paid' }), 3);
  assert.equal(calls, 2);
  assert.throws(() => limiter.tryAcquire({ id: '3', plan: 'free' }, 2), RangeError);
});

test('a flood of random keys stays bounded, and an honest key already present is still limited', () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({
    key: (k: string) => k,
    limiter: fixedWindow({ permitLimit: 5, window: 60_000, clock }),
    maxPartitions: 1000,
  });
  for (let i = 0; i < 5; i++) assert.ok(limiter.tryAcquire('honest').granted);
  let overflowed = 0;
  for (let i = 0; i < 20_000; i++) {
    clock.advance(1);
    const lease = limiter.tryAcquire(randomUUID());
    if (lease.reason === 'overflow') {
      overflowed++;
      assert.ok(lease.retryAfterMs !== undefined && lease.retryAfterMs >= 0);
    }
    assert.ok(limiter.size <= 1000);
  }
  assert.ok(overflowed > 0, 'new keys were turned away once full of live partitions');
  assert.equal(limiter.tryAcquire('honest').granted, false, 'the live key was never reset');
  assert.equal(limiter.overflows, overflowed);
});

test('partitions back to full are dropped first, and dropping them changes no decision', () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({
    key: (k: string) => k,
    limiter: slidingWindow({ permitLimit: 2, window: 100, segmentsPerWindow: 4, clock }),
    maxPartitions: 50,
  });
  for (let round = 0; round < 20; round++) {
    for (let i = 0; i < 50; i++) assert.ok(limiter.tryAcquire(`r${round}-${i}`).granted);
    clock.advance(100); // every partition of this round is full again
  }
  assert.equal(limiter.overflows, 0);
  assert.ok(limiter.evictions >= 19 * 50 - 50);
  // A live partition survives sweeps with its state intact.
  limiter.tryAcquire('keep', 2);
  for (let i = 0; i < 100; i++) limiter.tryAcquire(`x${i}`);
  assert.equal(limiter.tryAcquire('keep').granted, false);
});

test("overflow 'shared': new keys beyond the bound share one bucket", () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({
    key: (k: string) => k,
    limiter: fixedWindow({ permitLimit: 3, window: 60_000, clock }),
    maxPartitions: 2,
    overflow: 'shared',
  });
  limiter.tryAcquire('a');
  limiter.tryAcquire('b');
  const shared = ['c', 'd', 'e', 'f'].map((k) => limiter.tryAcquire(k).granted);
  assert.deepEqual(shared, [true, true, true, false]);
  assert.equal(limiter.size, 2);
});

test('concurrency partitions become droppable when their leases are released', () => {
  const limiter = partitioned({
    key: (k: string) => k,
    limiter: concurrency({ permitLimit: 1 }),
    maxPartitions: 10,
  });
  const leases = [...Array(10)].map((_, i) => limiter.tryAcquire(`k${i}`));
  assert.equal(limiter.tryAcquire('new').reason, 'overflow');
  for (const lease of leases) lease.release();
  assert.ok(limiter.tryAcquire('new').granted);
  assert.equal(limiter.size, 1);
});

test('memory follows the live set below maxPartitions (sweeps as the map doubles)', () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({
    key: (k: string) => k,
    limiter: tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: 10, clock }),
  });
  for (let i = 0; i < 50_000; i++) {
    limiter.tryAcquire(`k${i}`);
    clock.advance(1);
  }
  assert.ok(limiter.size < 5000, `size ${limiter.size}`);
});

test('invalid options are TypeErrors or RangeErrors naming the option and the value', () => {
  const spec = fixedWindow({ permitLimit: 1, window: 1000 });
  assert.throws(
    () => partitioned({ key: 'ip' as never, limiter: spec }),
    /partitioned: key must be a function.*"ip"/,
  );
  assert.throws(() => partitioned({ key: String, limiter: {} as never }), /partitioned: limiter must be/);
  assert.throws(() => partitioned({ key: String, limiter: spec, maxPartitions: 0 }), /maxPartitions.*got 0/);
  assert.throws(
    () => partitioned({ key: String, limiter: spec, overflow: 'drop' as never }),
    /overflow.*"drop"/,
  );
  const bad = partitioned({ key: (k: string) => k, limiter: () => 42 as never });
  assert.throws(() => bad.tryAcquire('x'), /limiter\("x"\) must return a limiter; got 42/);
});

test('acquire: granted at once, after waiting, or rejected, the lease names its partition key', async () => {
  const limiter = partitioned({
    key: (k: string) => `user:${k}`,
    limiter: concurrency({ permitLimit: 1, queueLimit: 1 }),
  });
  const first = await limiter.acquire('a');
  assert.equal(first.key, 'user:a');
  const waiting = limiter.acquire('a');
  assert.equal((await limiter.acquire('a')).key, 'user:a', 'the queue-full rejection');
  first.release();
  const granted = await waiting;
  assert.equal(granted.granted, true);
  assert.equal(granted.key, 'user:a', 'the lease granted from the queue');
  granted.release();
});

describe('a key that is not a string is a TypeError, and nothing is charged', () => {
  const notStrings: Array<[string, unknown]> = [
    ['undefined', undefined],
    ['a number', 42],
    ['an object', { id: 'alice' }],
  ];
  const setup = () => {
    const clock = manualClock(0, false);
    const limiter = partitioned<unknown>({
      key: (resource) => resource as string,
      limiter: fixedWindow({ permitLimit: 3, window: '1m', clock }),
      maxPartitions: 2,
    });
    const remaining = (key: string) => limiter.statistics(key).available;
    return { clock, limiter, remaining };
  };
  const refused = (limiter: ReturnType<typeof setup>['limiter'], key: unknown) => {
    assert.throws(
      () => limiter.tryAcquire(key),
      (e) => e instanceof TypeError && /must return a string/.test(e.message),
    );
  };

  for (const [what, key] of notStrings) {
    test(`${what} on a fresh limiter`, async () => {
      const { limiter } = setup();
      refused(limiter, key);
      await assert.rejects(limiter.acquire(key), TypeError);
      assert.equal(limiter.size, 0);
      assert.equal(limiter.statistics('alice').granted, 0);
    });

    test(`${what} after a partition was created, and after it was decided again (the last-key cache)`, async () => {
      const { limiter, remaining } = setup();
      limiter.tryAcquire('alice');
      refused(limiter, key);
      await assert.rejects(limiter.acquire(key), TypeError);
      assert.equal(remaining('alice'), 2, 'alice was not charged');
      limiter.tryAcquire('alice');
      refused(limiter, key);
      assert.equal(remaining('alice'), 1, 'alice was not charged');
      assert.equal(limiter.statistics('alice').granted, 2);
    });

    test(`${what} after a sweep dropped partitions`, () => {
      const { clock, limiter, remaining } = setup();
      limiter.tryAcquire('alice');
      limiter.tryAcquire('alice');
      limiter.tryAcquire('bob');
      clock.advance(60_000);
      limiter.tryAcquire('bob'); // bob is live again, alice idle: the next new key sweeps her away
      limiter.tryAcquire('carol');
      assert.equal(limiter.evictions, 1);
      refused(limiter, key);
      assert.deepEqual([remaining('bob'), remaining('carol')], [2, 2], 'nobody was charged');
      assert.equal(
        limiter.statistics('bob').granted,
        5,
        'granted over all partitions: alice 2, bob 2, carol 1',
      );
    });
  }

  test('through a chain: a TypeError, no member charged', () => {
    const { limiter, remaining } = setup();
    const global = fixedWindow({ permitLimit: 5, window: '1m' });
    const both = chain(limiter, global);
    both.tryAcquire('alice');
    assert.throws(() => both.tryAcquire(undefined as never), TypeError);
    assert.deepEqual([remaining('alice'), global.statistics().available], [2, 4]);
  });
});
