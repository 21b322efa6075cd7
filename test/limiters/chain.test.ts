import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ChainLease, chain, concurrency, fixedWindow, partitioned, tokenBucket } from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

test('a request rejected by a later member consumes nothing from the earlier ones', () => {
  const clock = manualClock(0, false);
  const perClient = partitioned({
    key: (ip: string) => ip,
    limiter: fixedWindow({ permitLimit: 3, window: 1000, clock }),
  });
  const global = fixedWindow({ permitLimit: 1, window: 1000, clock });
  const both = chain(perClient, global);
  assert.ok(both.tryAcquire('a').granted);
  for (let i = 0; i < 10; i++) {
    const lease = both.tryAcquire('a');
    assert.equal(lease.granted, false);
    assert.equal(lease.source, global, 'the global limiter said no');
  }
  assert.equal(perClient.statistics('a').available, 2, 'the client paid for one request only');
  assert.deepEqual(global.statistics(), { available: 0, queued: 0, granted: 1, rejected: 10 });
});

test('the rejection carries the rejecting member and the longest known wait', () => {
  const clock = manualClock(0, false);
  const a = fixedWindow({ permitLimit: 1, window: 1000, clock });
  const b = fixedWindow({ permitLimit: 1, window: 5000, clock });
  const ab = chain(a, b);
  ab.tryAcquire();
  clock.set(200);
  const lease = ab.tryAcquire();
  assert.ok(lease instanceof ChainLease);
  assert.equal(lease.source, a, 'the first member that said no');
  assert.equal(lease.retryAfterMs, 4800, 'b frees only at 5000');
  assert.equal(a.statistics().rejected + b.statistics().rejected, 1, 'a rejection is counted once');
});

test('a granted chain lease holds every member and releases them together', () => {
  const pool = concurrency({ permitLimit: 2 });
  const rate = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 1000 });
  const both = chain(rate, pool);
  const lease = both.tryAcquire() as ChainLease;
  assert.equal(lease.members.length, 2);
  assert.equal(pool.statistics().available, 1);
  lease.release();
  lease.release();
  assert.equal(pool.statistics().available, 2);
  assert.equal(rate.statistics().available, 9, 'time-based permits are spent');
});

test('a waiting request is charged once, by every member, when it is admitted', async () => {
  const clock = manualClock();
  const global = fixedWindow({ permitLimit: 5, window: 1000, clock });
  const pool = concurrency({ permitLimit: 1, queueLimit: 5 });
  const both = chain(global, pool);
  const first = both.tryAcquire();
  const second = track(both.acquire());
  const third = track(both.acquire());
  await flush();
  assert.equal(global.statistics().available, 4, 'waiters hold nothing');
  first.release();
  await flush();
  assert.equal(second.value?.granted, true);
  assert.equal(third.settled, false);
  assert.equal(global.statistics().available, 3);
  second.value!.release();
  await flush();
  assert.equal(third.value?.granted, true);
  assert.equal(global.statistics().available, 2);
  assert.deepEqual(pool.statistics(), { available: 0, queued: 0, granted: 3, rejected: 0 });
});

test('a waiter admitted by one member moves to the queue of another that is short', async () => {
  const clock = manualClock();
  const rate = fixedWindow({ permitLimit: 1, window: 1000, clock, queueLimit: 5 });
  const pool = concurrency({ permitLimit: 1, queueLimit: 5 });
  const both = chain(pool, rate);
  const first = both.tryAcquire();
  const waiting = track(both.acquire());
  first.release(); // pool admits it, but the rate limiter is spent until 1000
  await flush();
  assert.equal(waiting.settled, false);
  assert.equal(rate.statistics().queued, 1);
  assert.equal(pool.statistics().available, 1, 'nothing held while waiting');
  clock.advance(1000);
  await flush();
  assert.equal(waiting.value?.granted, true);
  assert.equal(pool.statistics().available, 0);
});

test('an aborted chain waiter leaves whichever queue it is in, charged nothing', async () => {
  const clock = manualClock();
  const rate = fixedWindow({ permitLimit: 1, window: 1000, clock, queueLimit: 1 });
  const pool = concurrency({ permitLimit: 1, queueLimit: 1 });
  const both = chain(pool, rate);
  const held = both.tryAcquire();
  const controller = new AbortController();
  const waiting = track(both.acquire(1, { signal: controller.signal }));
  held.release(); // moves to rate's queue
  await flush();
  controller.abort(new Error('gone'));
  await flush();
  assert.equal((waiting.error as Error).message, 'gone');
  assert.equal(rate.statistics().queued, 0);
  clock.advance(1000);
  assert.deepEqual([pool.statistics().available, rate.statistics().available], [1, 1]);
});

test('property: no permit is leaked or double-charged by a chain under random traffic', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          client: fc.constantFrom('a', 'b', 'c'),
          wait: fc.boolean(),
          abort: fc.boolean(),
          release: fc.boolean(),
          tick: fc.integer({ min: 0, max: 400 }),
        }),
        { minLength: 1, maxLength: 200 },
      ),
      async (ops) => {
        const clock = manualClock();
        const perClient = partitioned({
          key: (c: string) => c,
          limiter: fixedWindow({ permitLimit: 4, window: 1000, clock, queueLimit: 2 }),
        });
        const pool = concurrency({ permitLimit: 2, queueLimit: 3 });
        const both = chain(perClient, pool);
        const leases: { lease?: ChainLease; error?: unknown; settled: boolean }[] = [];
        const controllers: AbortController[] = [];
        let grants = 0;
        const perClientGrants = new Map<string, number>();
        for (const op of ops) {
          if (op.wait) {
            const controller = new AbortController();
            controllers.push(controller);
            const t = track(both.acquire(op.client, 1, { signal: controller.signal }));
            leases.push(t as never);
            if (op.abort) controller.abort();
          } else {
            leases.push({ lease: both.tryAcquire(op.client) as ChainLease, settled: true });
          }
          await flush();
          if (op.release) {
            for (const l of leases) {
              const lease = l.lease ?? (l as { value?: ChainLease }).value;
              if (lease?.granted) lease.release();
            }
          }
          clock.advance(op.tick);
          await flush();
        }
        for (const c of controllers) c.abort();
        await flush();
        for (const l of leases) {
          const lease = l.lease ?? (l as { value?: ChainLease }).value;
          if (lease?.granted) {
            grants++;
            lease.release();
          }
        }
        // Every grant was charged by both members, exactly once; nothing is held or queued at the end.
        assert.equal(pool.statistics().granted, grants);
        assert.equal(pool.statistics().available, 2);
        assert.equal(pool.statistics().queued, 0);
        for (const c of ['a', 'b', 'c']) perClientGrants.set(c, 0);
        assert.equal(perClient.statistics('a').granted, grants);
      },
    ),
    { numRuns: 300 },
  );
});

test('leases name their partition key, in a chain too', () => {
  const perClient = partitioned({
    key: (ip: string) => `ip:${ip}`,
    limiter: fixedWindow({ permitLimit: 1, window: 1000 }),
  });
  const global = fixedWindow({ permitLimit: 5, window: 1000 });
  assert.equal(perClient.tryAcquire('1.2.3.4').key, 'ip:1.2.3.4');
  const both = chain(global, perClient);
  const rejected = both.tryAcquire('1.2.3.4') as ChainLease;
  assert.equal(rejected.members[0].key, 'ip:1.2.3.4');
  const granted = both.tryAcquire('5.6.7.8') as ChainLease;
  assert.deepEqual(
    granted.members.map((l) => l.key),
    [undefined, 'ip:5.6.7.8'],
  );
  assert.equal(perClient.algorithmFor('ip:5.6.7.8').limit, 1);
});

test('a chain decides at one instant: one clock reading a decision, granted or rejected, for members that share the clock', () => {
  let reads = 0;
  let t = 0;
  // Each reading moves time on by 400 ms: members reading the clock one after another would see different windows.
  const clock = {
    now: () => {
      reads++;
      t += 400;
      return t;
    },
  };
  const perClient = partitioned({
    key: (ip: string) => ip,
    limiter: fixedWindow({ permitLimit: 5, window: 1000, clock }),
  });
  const global = fixedWindow({ permitLimit: 2, window: 1000, clock });
  const both = chain(perClient, global);
  both.tryAcquire('a'); // creates the partition (its first window starts at a reading of its own)
  for (const expected of [true, false]) {
    reads = 0;
    const lease = both.tryAcquire('a');
    if (expected) assert.ok(lease.granted);
    assert.equal(reads, 1, `one reading for a ${lease.granted ? 'grant' : 'rejection'}`);
    t -= 400; // the next decision in the same window
  }
  // A member with a clock of its own reads its own.
  const own = chain(
    fixedWindow({ permitLimit: 5, window: 1000, clock }),
    fixedWindow({ permitLimit: 5, window: 1000 }),
  );
  reads = 0;
  assert.ok(own.tryAcquire().granted);
  assert.equal(reads, 1);
});
