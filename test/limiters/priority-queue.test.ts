import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  adaptiveConcurrency,
  concurrency,
  fixedWindow,
  type Lease,
  type Priority,
  partitioned,
  tokenBucket,
} from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

const RUNS = Number(process.env.FLOODGATE_PROPERTY_RUNS ?? 150);
const RANK: Record<string, number> = { critical: 2, default: 1, sheddable: 0 };
const rankOf = (p: Priority | undefined) => (p === undefined ? 1 : typeof p === 'number' ? p : RANK[p]);

type Op =
  | { op: 'acquire'; permits: number; priority: Priority | undefined }
  | { op: 'try'; permits: number; priority: Priority | undefined }
  | { op: 'abort'; pick: number }
  | { op: 'release'; pick: number }
  | { op: 'setLimit'; limit: number }
  | { op: 'tick'; dt: number };

const priority = fc.constantFrom<Priority | undefined>(undefined, 'critical', 'default', 'sheddable', 7, -3);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      permits: fc.integer({ min: 1, max: 2 }),
      priority,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('try' as const),
      permits: fc.integer({ min: 0, max: 2 }),
      priority,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('abort' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('setLimit' as const), limit: fc.integer({ min: 2, max: 5 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('tick' as const), dt: fc.integer({ min: 0, max: 150 }) }),
  },
);

interface Waiting {
  seq: number;
  rank: number;
  permits: number;
  state: ReturnType<typeof track<Lease>>;
  controller: AbortController;
}

/**
 * The queue's invariants, for a concurrency limiter and a fixed window, both queue orders, one partition or two,
 * any mix of classes, aborts, releases, limit changes and time:
 * - a waiter is never admitted while one of a higher class still waits in the same queue (whether that one fits
 *   or not: head-of-line blocking is by class too), nor while an earlier (oldest-first) or later (newest-first)
 *   one of its own class waits; a new arrival is not granted past such waiters either;
 * - a waiter is evicted only to make room for a newcomer of a higher class (or, newest-first, of its own) that is
 *   then queued;
 * - no waiter is lost or answered twice: `queued` is exactly the permits of the waiters still pending, every
 *   promise settles once, an aborted waiter rejects with the signal's reason and leaves at once, and once every
 *   lease is released (and time has passed) nobody is left waiting who could be served.
 */
test('priority queue: classes first, FIFO or LIFO within a class, nothing lost, aborts remove', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        kind: fc.constantFrom('concurrency' as const, 'fixedWindow' as const),
        lifo: fc.boolean(),
        queueLimit: fc.integer({ min: 1, max: 6 }),
        keys: fc.integer({ min: 1, max: 2 }),
      }),
      fc.array(fc.record({ key: fc.integer({ min: 0, max: 1 }), step: opArb }), {
        minLength: 1,
        maxLength: 200,
      }),
      async (config, steps) => {
        const clock = manualClock(0);
        const queueOrder = config.lifo ? ('newest-first' as const) : ('oldest-first' as const);
        const spec =
          config.kind === 'concurrency'
            ? concurrency({ permitLimit: 3, queueLimit: config.queueLimit, queueOrder, clock })
            : fixedWindow({ permitLimit: 3, window: 100, queueLimit: config.queueLimit, queueOrder, clock });
        const byKey = partitioned({ key: (k: string) => k, limiter: spec });
        const queues: Waiting[][] = [[], []];
        const held: Lease[] = [];
        let seq = 0;
        let limit = 3;

        const settled = (key: number): Waiting[] => {
          const done = queues[key].filter((w) => w.state.settled);
          queues[key] = queues[key].filter((w) => !w.state.settled);
          return done;
        };
        // Every waiter served in this step must come before every one still waiting in the same queue.
        const checkServed = (key: number, served: Waiting[], context: string) => {
          for (const w of served) {
            for (const other of queues[key]) {
              const before =
                other.rank > w.rank ||
                (other.rank === w.rank && (config.lifo ? other.seq > w.seq : other.seq < w.seq));
              assert.ok(
                !before,
                `${context}: #${w.seq} (class ${w.rank}) served past #${other.seq} (class ${other.rank})`,
              );
            }
          }
        };

        for (const { key: k, step } of steps) {
          const key = k % config.keys;
          const name = `k${key}`;
          if (step.op === 'acquire' || step.op === 'try') {
            const rank = rankOf(step.priority);
            const permits = Math.min(step.permits, limit);
            if (step.op === 'try') {
              const lease = byKey.tryAcquire(name, permits, step.priority);
              if (lease.granted && permits > 0) {
                checkServed(key, [{ seq: seq++, rank, permits } as Waiting], 'tryAcquire');
                held.push(lease);
              }
              continue;
            }
            const controller = new AbortController();
            const waiter: Waiting = {
              seq: seq++,
              rank,
              permits,
              controller,
              state: track(
                byKey.acquire(name, permits, { signal: controller.signal, priority: step.priority }),
              ),
            };
            const before = [...queues[key]];
            queues[key].push(waiter);
            await flush();
            const done = settled(key);
            for (const w of done) {
              if (w === waiter) {
                if (w.state.value?.granted) checkServed(key, [w], 'a new arrival');
                continue;
              }
              // Someone already waiting was answered by an arrival: evicted for it, never admitted.
              assert.equal(w.state.value?.granted, false, `#${w.seq} admitted by an arrival`);
              assert.equal(w.state.value?.reason, 'evicted');
              assert.ok(before.includes(w));
              assert.ok(
                w.rank < rank || (config.lifo && w.rank === rank),
                `#${w.seq} evicted by a lower class`,
              );
              assert.ok(!waiter.state.settled, 'nobody is evicted for a newcomer that is not queued');
            }
            for (const w of done) if (w.state.value?.granted) held.push(w.state.value);
          } else {
            if (step.op === 'abort') {
              const all = queues[key];
              if (all.length === 0) continue;
              const w = all[step.pick % all.length];
              const reason = new Error('gone');
              w.controller.abort(reason);
              await flush();
              assert.equal(w.state.error, reason, 'an aborted waiter rejects with the reason');
            } else if (step.op === 'release') {
              if (held.length === 0) continue;
              held.splice(step.pick % held.length, 1)[0].release();
            } else if (step.op === 'setLimit') {
              limit = step.limit;
              spec.setLimit(limit);
            } else {
              clock.advance(step.dt);
            }
            await flush();
            for (let q = 0; q < config.keys; q++) {
              const done = settled(q);
              const served = done.filter((w) => w.state.value?.granted);
              checkServed(q, served, step.op);
              for (const w of served) held.push(w.state.value!);
              for (const w of done) {
                if (w.state.value?.granted === false) {
                  // Only a lowered limit rejects a waiter already queued, and only one that can never fit.
                  assert.equal(step.op, 'setLimit');
                  assert.equal(w.state.value.reason, 'limit');
                  assert.ok(w.permits > limit);
                }
              }
            }
          }
          for (let q = 0; q < config.keys; q++) {
            const pending = queues[q].reduce((sum, w) => sum + w.permits, 0);
            assert.equal(byKey.statistics(`k${q}`).queued, pending, 'queued is exactly the pending waiters');
          }
        }
        // Nothing lost: give everything back and let time pass; every waiter is then served.
        for (const lease of held.splice(0)) lease.release();
        spec.setLimit(5);
        for (let i = 0; i < 20 && queues.some((q) => q.length > 0); i++) {
          clock.advance(100);
          await flush();
          for (let q = 0; q < config.keys; q++) {
            for (const w of settled(q)) {
              assert.equal(w.state.value?.granted, true);
              w.state.value!.release();
            }
          }
        }
        assert.deepEqual(
          queues.map((q) => q.length),
          [0, 0],
        );
      },
    ),
    { numRuns: RUNS },
  );
});

test('concurrency: a critical waiter is served before older default and sheddable ones', async () => {
  const limiter = concurrency({ permitLimit: 1, queueLimit: 10 });
  const held = limiter.tryAcquire();
  const order: string[] = [];
  const wait = (name: string, priority?: Priority) =>
    limiter.acquire(1, { priority }).then((lease) => {
      order.push(name);
      return lease;
    });
  const shed = wait('sheddable', 'sheddable');
  const first = wait('default 1');
  const second = wait('default 2', 'default');
  const critical = wait('critical', 'critical');
  assert.equal(limiter.tryAcquire(1, 'critical').granted, false, 'no permit free');
  held.release();
  for (const lease of [critical, first, second, shed]) (await lease).release();
  assert.deepEqual(order, ['critical', 'default 1', 'default 2', 'sheddable']);
});

test('a new arrival of a higher class is granted past lower-class waiters; of the same class it is not', async () => {
  const clock = manualClock();
  const limiter = fixedWindow({ permitLimit: 4, window: 1000, queueLimit: 10, clock });
  limiter.tryAcquire(3);
  const big = track(limiter.acquire(2, { priority: 'sheddable' }));
  assert.equal(limiter.tryAcquire(1, 'sheddable').granted, false, 'its own class waits behind it');
  assert.equal(limiter.tryAcquire(1).granted, true, 'a default request is not held up by a sheddable waiter');
  clock.advance(1000);
  await flush();
  assert.equal(big.value?.granted, true);
});

test('a full queue evicts the lowest class, oldest first, for a higher newcomer; never in vain', async () => {
  const clock = manualClock();
  const limiter = tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: 100, queueLimit: 3, clock });
  limiter.tryAcquire(2);
  const low = track(limiter.acquire(1, { priority: 'sheddable' }));
  const mid1 = track(limiter.acquire(1));
  const mid2 = track(limiter.acquire(1));
  const big = track(limiter.acquire(2, { priority: 'default' }));
  await flush();
  assert.equal(big.value?.reason, 'queue-full', 'one sheddable permit makes no room for two…');
  assert.equal(low.settled, false, '…so it was not evicted');
  const high = track(limiter.acquire(1, { priority: 'critical' }));
  await flush();
  assert.equal(low.value?.reason, 'evicted');
  for (const next of [high, mid1, mid2]) {
    clock.advance(100);
    await flush();
    assert.equal(next.value?.granted, true, 'critical first, then the default ones in order');
  }
});

test('newest-first with classes: the newest of the highest class first', async () => {
  const limiter = concurrency({ permitLimit: 1, queueLimit: 10, queueOrder: 'newest-first' });
  const held = limiter.tryAcquire();
  const order: string[] = [];
  const wait = (name: string, priority?: Priority) =>
    limiter.acquire(1, { priority }).then((lease) => {
      order.push(name);
      return lease;
    });
  const waits = [wait('c1', 'critical'), wait('d1'), wait('c2', 'critical'), wait('d2')];
  held.release();
  for (const name of ['c2', 'c1', 'd2', 'd1']) {
    await flush();
    assert.equal(order.at(-1), name);
    (await waits[['c1', 'd1', 'c2', 'd2'].indexOf(name)]).release();
  }
});

test('a bad priority is a TypeError naming it, and nothing is queued', async () => {
  const limiter = concurrency({ permitLimit: 1, queueLimit: 2 });
  assert.throws(
    () => limiter.tryAcquire(1, 'urgent' as never),
    /priority must be 'critical', 'default', 'sheddable' or a finite number; got "urgent"/,
  );
  await assert.rejects(limiter.acquire(1, { priority: Number.NaN }), TypeError);
  assert.equal(limiter.statistics().queued, 0);
});

test('adaptiveConcurrency shares the queue: it no longer evicts a lower class for a newcomer that still does not fit', async () => {
  const clock = manualClock(0);
  const limiter = adaptiveConcurrency({
    clock,
    eventLoop: false,
    algorithm: 'aimd',
    initialLimit: 2,
    minLimit: 2,
    maxLimit: 2,
    queueLimit: 3,
    queueInterval: '10s',
    targetDelay: '10s',
  });
  const held = limiter.tryAcquire(2);
  const low = track(limiter.acquire(1, { priority: 'sheddable' }));
  const mid = track(limiter.acquire(2));
  const big = track(limiter.acquire(2, { priority: 'default' }));
  await flush();
  assert.equal(
    big.value?.reason,
    'queue-full',
    'evicting the one sheddable permit would not make room for two',
  );
  assert.equal(low.settled, false, 'so it keeps its place');
  const one = track(limiter.acquire(1, { priority: 'critical' }));
  await flush();
  assert.equal(low.value?.reason, 'evicted');
  held.release();
  await flush();
  assert.equal(one.value?.granted, true, 'the critical waiter first');
  assert.equal(mid.settled, false);
  one.value!.release();
  await flush();
  assert.equal(mid.value?.granted, true);
  mid.value!.release();
});
