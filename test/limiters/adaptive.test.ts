import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  adaptiveConcurrency,
  chain,
  type EventLoopMonitor,
  fixedWindow,
  type Lease,
  partitioned,
} from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

/** Holds `n` leases for `rtt` ms each, one wave after another, `waves` times. */
function waves(
  limiter: ReturnType<typeof adaptiveConcurrency>,
  clock: ReturnType<typeof manualClock>,
  count: number,
  rtt: number,
  outcome?: { dropped?: boolean; ignore?: boolean },
): void {
  for (let w = 0; w < count; w++) {
    const leases: Lease[] = [];
    for (let i = 0; i < limiter.currentLimit; i++) leases.push(limiter.tryAcquire());
    clock.advance(rtt);
    for (const lease of leases) lease.release(outcome);
  }
}

test('learns: probes, then grows while latency stays at the baseline; statistics and onLimitChange report it', () => {
  const clock = manualClock(0, false);
  const changes: [number, number][] = [];
  const limiter = adaptiveConcurrency({
    clock,
    minSamples: 3,
    onLimitChange: (l, p) => changes.push([l, p]),
  });
  assert.equal(limiter.statistics().limit, 3, 'starts by probing at probeLimit');
  waves(limiter, clock, 60, 10);
  const stats = limiter.statistics();
  assert.ok(stats.limit > 20, `grew to ${stats.limit}`);
  assert.deepEqual(changes[0], [20, 3]);
  assert.equal(changes.at(-1)![0], stats.limit);
  assert.equal(stats.inFlight, 0);
  assert.equal(stats.available, stats.limit);
});

test('never more in flight than the limit at grant time; a lowered limit takes nothing back', () => {
  const clock = manualClock(0, false);
  const limiter = adaptiveConcurrency({ clock, window: 10, minSamples: 3, initialLimit: 50, smoothing: 1 });
  waves(limiter, clock, 2, 10); // probe done: limit 50
  assert.equal(limiter.currentLimit, 50);
  const held: Lease[] = [];
  for (let i = 0; i < 60; i++) held.push(limiter.tryAcquire());
  assert.equal(held.filter((l) => l.granted).length, 50);
  assert.equal(held[50].reason, 'limit');
  clock.advance(100); // 10× the baseline: the first window of releases cuts the limit
  for (let i = 0; i < 10; i++) held[i].release();
  assert.ok(limiter.currentLimit < 40, `cut to ${limiter.currentLimit}`);
  assert.equal(limiter.statistics().inFlight, 40, 'leases granted before the cut are kept');
  assert.equal(limiter.tryAcquire().granted, false, 'nothing granted while in flight ≥ limit');
});

test('release({ ignore: true }) teaches nothing; release({ dropped: true }) backs off and never grows', () => {
  const clock = manualClock(0, false);
  const limiter = adaptiveConcurrency({ clock, window: 10, minSamples: 3 });
  waves(limiter, clock, 2, 10);
  const start = limiter.currentLimit;
  waves(limiter, clock, 30, 1000, { ignore: true });
  assert.equal(limiter.currentLimit, start, 'ignored samples change nothing');
  let previous = limiter.currentLimit;
  for (let i = 0; i < 40; i++) {
    waves(limiter, clock, 1, 10, { dropped: true });
    assert.ok(limiter.currentLimit <= previous);
    previous = limiter.currentLimit;
  }
  assert.equal(limiter.currentLimit, 1, 'steady drops end at minLimit');
});

test('samples overlapping an event-loop stall are not learnt from; the brake admits only critical', () => {
  const clock = manualClock(0, false);
  let stallEnd = Number.NEGATIVE_INFINITY;
  let delay = 0;
  const monitor: EventLoopMonitor = {
    stalledSince: (since) => stallEnd > since,
    delayMs: () => delay,
    utilization: () => 0,
  };
  const limiter = adaptiveConcurrency({ clock, minSamples: 3, eventLoop: { monitor, maxDelay: 100 } });
  waves(limiter, clock, 6, 10);
  const before = limiter.currentLimit;
  const leases = Array.from({ length: before }, () => limiter.tryAcquire());
  clock.advance(500); // a 490 ms GC pause inside every lease
  stallEnd = clock.now();
  for (const lease of leases) lease.release();
  clock.advance(200);
  waves(limiter, clock, 1, 10);
  assert.ok(limiter.currentLimit >= before, `not pushed down: ${before} → ${limiter.currentLimit}`);
  delay = 150;
  assert.equal(limiter.tryAcquire(1, 'default').reason, 'event-loop');
  assert.equal(limiter.tryAcquire(1, 'critical').granted, true);
});

test('classes: reserve keeps a share for critical; a full queue evicts the lowest class first; higher served first', async () => {
  const clock = manualClock(0);
  const limiter = adaptiveConcurrency({
    clock,
    algorithm: 'aimd',
    initialLimit: 10,
    minLimit: 10,
    maxLimit: 10,
    queueLimit: 2,
    classes: { reserve: { critical: 0.2 } },
  });
  const held: Lease[] = [];
  for (let i = 0; i < 8; i++) held.push(limiter.tryAcquire(1, 'sheddable'));
  assert.equal(limiter.tryAcquire(1, 'default').reason, 'limit', 'default may not use the reserved 20 %');
  held.push(limiter.tryAcquire(1, 'critical'), limiter.tryAcquire(1, 'critical'));
  assert.ok(held.every((l) => l.granted));
  const shed = track(limiter.acquire(1, { priority: 'sheddable' }));
  const normal = track(limiter.acquire(1, { priority: 'default' }));
  const critical = track(limiter.acquire(1, { priority: 'critical' })); // the queue is full: evicts sheddable
  await flush();
  assert.equal(shed.value?.reason, 'evicted');
  held.pop()!.release();
  await flush();
  assert.equal(critical.value?.granted, true, 'the critical waiter goes first');
  assert.equal(normal.settled, false);
  held.pop()!.release();
  held.pop()!.release();
  assert.equal(normal.settled, false, '8 held: default is at its ceiling');
  held.pop()!.release(); // 7 held now: default fits under its 8
  await flush();
  assert.equal(normal.value?.granted, true);
});

test('queue delay: a waiter waits at most queueInterval, then targetDelay once the queue stands, served newest first', async () => {
  const clock = manualClock(0);
  const limiter = adaptiveConcurrency({
    clock,
    algorithm: 'aimd',
    initialLimit: 1,
    maxLimit: 1,
    queueLimit: 100,
    targetDelay: 5,
    queueInterval: 100,
  });
  const first = limiter.tryAcquire();
  const a = track(limiter.acquire());
  clock.advance(101);
  await flush();
  assert.equal(a.value?.reason, 'queue-delay', 'waited past the interval');
  const b = track(limiter.acquire());
  clock.advance(60);
  const c = track(limiter.acquire());
  clock.advance(45); // b has waited 105 (expires), the queue has stood for 105: c's bound is 5 ms
  await flush();
  assert.equal(b.value?.reason, 'queue-delay');
  assert.equal(c.value?.reason, 'queue-delay');
  const d = track(limiter.acquire());
  clock.advance(2);
  const e = track(limiter.acquire());
  clock.advance(1);
  assert.equal(limiter.statistics().queued, 2);
  first.release();
  await flush();
  // The queue was emptied when c left, so it is not standing: oldest first.
  assert.equal(d.value?.granted, true);
  assert.equal(e.settled, false);
});

test('standing queue serves newest first (adaptive LIFO)', async () => {
  const clock = manualClock(0);
  const limiter = adaptiveConcurrency({
    clock,
    algorithm: 'aimd',
    initialLimit: 1,
    maxLimit: 1,
    queueLimit: 100,
    targetDelay: 50,
    queueInterval: 100,
  });
  const held = limiter.tryAcquire();
  const waiters = [];
  for (let i = 0; i < 12; i++) {
    waiters.push(track(limiter.acquire()));
    clock.advance(10);
  }
  // The queue has not been empty for 120 ms: it stands; waiters older than 50 ms are dropped, newest served.
  held.release();
  await flush();
  assert.equal(waiters.at(-1)!.value?.granted, true);
  assert.equal(waiters[0].value?.reason, 'queue-delay');
});

test('an aborted waiter leaves at once and is charged nothing', async () => {
  const clock = manualClock(0);
  const limiter = adaptiveConcurrency({
    clock,
    algorithm: 'aimd',
    initialLimit: 1,
    maxLimit: 1,
    queueLimit: 5,
  });
  const held = limiter.tryAcquire();
  const controller = new AbortController();
  const waiting = track(limiter.acquire(1, { signal: controller.signal }));
  controller.abort(new Error('gone'));
  await flush();
  assert.equal((waiting.error as Error).message, 'gone');
  assert.deepEqual(limiter.statistics().queued, 0);
  held.release();
  assert.equal(limiter.statistics().inFlight, 0);
  assert.equal(limiter.tryAcquire().granted, true);
});

test('partitioned: each key learns its own limit', () => {
  const clock = manualClock(0, false);
  const byKey = partitioned({
    key: (k: string) => k,
    limiter: adaptiveConcurrency({ clock, minSamples: 3 }),
  });
  for (let w = 0; w < 20; w++) {
    const fast = Array.from({ length: 20 }, () => byKey.tryAcquire('fast'));
    const slow = Array.from({ length: 20 }, () => byKey.tryAcquire('slow'));
    clock.advance(10);
    for (const l of fast) l.release();
    clock.advance(w < 2 ? 0 : 90);
    for (const l of slow) l.release();
  }
  const fast = byKey.tryAcquire('fast', 0);
  const slow = byKey.tryAcquire('slow', 0);
  assert.ok(fast.limit > slow.limit, `fast ${fast.limit} > slow ${slow.limit}`);
});

test('chain: all or nothing with a rate limit; the chain lease reports the outcome to the adaptive member', () => {
  const clock = manualClock(0, false);
  const adaptive = adaptiveConcurrency({
    clock,
    minSamples: 3,
    algorithm: 'aimd',
    timeout: '1h', // a fixed threshold: nothing probed, the limit starts at 4
    initialLimit: 4,
  });
  const both = chain(fixedWindow({ permitLimit: 5, window: 1000, clock }), adaptive);
  const leases = Array.from({ length: 5 }, () => both.tryAcquire());
  assert.deepEqual(
    leases.map((l) => l.granted),
    [true, true, true, true, false],
  );
  clock.advance(150);
  for (const l of leases) l.release({ dropped: true });
  assert.equal(adaptive.currentLimit, 3, 'backed off: 4 × 0.9, floored');
  assert.equal(adaptive.statistics().inFlight, 0);
});

test('options: bad values and unknown names are rejected naming the option', () => {
  assert.throws(() => adaptiveConcurrency({ algorithm: 'cubic' as never }), /algorithm must be one of/);
  assert.throws(
    () => adaptiveConcurrency({ minLimit: 10, maxLimit: 5 }),
    /minLimit must be a whole number from 1 to 5; got 10/,
  );
  assert.throws(
    () => adaptiveConcurrency({ initalLimit: 5 } as never),
    /adaptiveConcurrency: unknown option "initalLimit"; did you mean "initialLimit"\?/,
  );
  assert.throws(() => adaptiveConcurrency({ backoffRatio: 0.2 }), /backoffRatio must be a number above 0.4/);
  assert.throws(
    () => adaptiveConcurrency({ algorithm: 'aimd', smoothing: 0.5 }),
    /smoothing does not apply to algorithm 'aimd'/,
  );
  assert.throws(
    () => adaptiveConcurrency({ algorithm: 'vegas', tolerance: 2 }),
    /tolerance does not apply to algorithm 'vegas'/,
  );
  for (const [name, option] of [
    ['tolerance', { tolerance: 2 }],
    ['probeLimit', { probeLimit: 2 }],
    ['probeInterval', { probeInterval: '10s' }],
  ] as const) {
    assert.throws(
      () => adaptiveConcurrency({ algorithm: 'aimd', timeout: 100, ...option }),
      new RegExp(`${name} does not apply with a fixed timeout`),
    );
  }
  assert.throws(() => adaptiveConcurrency({ timeout: 100 }), /timeout applies to algorithm 'aimd' only/);
  assert.throws(
    () => adaptiveConcurrency({ classes: { reserve: { critcal: 0.2 } } }),
    /reserve.critcal names no class/,
  );
  assert.throws(
    () => adaptiveConcurrency({ classes: { reserve: { critical: 1 } } }),
    /reserve.critical must be a share/,
  );
  assert.throws(
    () => adaptiveConcurrency({ classes: { reserv: {} } as never }),
    /adaptiveConcurrency: classes: unknown option "reserv"; did you mean "reserve"/,
  );
  assert.throws(
    () => adaptiveConcurrency({ targetDelay: 500 }),
    /targetDelay \(500 ms\) must not be longer than queueInterval/,
  );
  assert.throws(
    () => adaptiveConcurrency({ clock: { now: () => 0 }, eventLoop: true }),
    /eventLoop: true needs the default clock/,
  );
  assert.throws(() => adaptiveConcurrency().tryAcquire(1, 'urgent' as never), /priority must be 'critical'/);
});

test('partitioned and chain pass the class to their adaptive members: the reserve holds through both', async () => {
  const clock = manualClock(0);
  const make = () =>
    adaptiveConcurrency({
      clock,
      algorithm: 'aimd',
      initialLimit: 10,
      minLimit: 10,
      maxLimit: 10,
      queueLimit: 1,
      classes: { reserve: { critical: 0.2 } },
    });
  const byUser = partitioned({ key: (user: string) => user, limiter: make() });
  for (let i = 0; i < 8; i++) assert.equal(byUser.tryAcquire('ann', 1, 'sheddable').granted, true);
  assert.equal(
    byUser.tryAcquire('ann', 1, 'sheddable').reason,
    'limit',
    'the reserve is kept in a partition',
  );
  assert.equal(byUser.tryAcquire('ann', 1, 'critical').granted, true);
  assert.equal((await byUser.acquire('ann', 1, { priority: 'critical' })).granted, true);
  assert.throws(() => byUser.tryAcquire('ann', 1, 'urgent' as never), /priority must be 'critical'/);

  const both = chain(fixedWindow({ clock, permitLimit: 100, window: 1000 }), make());
  for (let i = 0; i < 8; i++) assert.equal(both.tryAcquire(1, 'default').granted, true);
  assert.equal(both.tryAcquire(1).reason, 'limit', "no class is 'default': under the reserve");
  assert.equal(both.tryAcquire(1, 'critical').granted, true, 'the chain passes the class to its member');
  const waiting = track(both.acquire(1, { priority: 'sheddable' }));
  const critical = track(both.acquire(1, { priority: 'critical' }));
  await flush();
  assert.equal(critical.value?.granted, true, 'critical is admitted into the reserve at once');
  assert.equal(waiting.settled, false, 'sheddable waits: 10 held');
});
