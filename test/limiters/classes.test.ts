/**
 * `concurrency({ classes })`: a share of the limit reserved per class. A request of class `r` is granted only
 * while the permits held after it stay within what the shares of the classes above `r` leave it; a critical
 * request is never refused while the critical share is unused; queued waiters are served by the same rule.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { concurrency, type Lease, type Priority, partitioned } from '../../src/index.ts';
import { flush, manualClock } from '../support/clock.ts';

const RUNS = Number(process.env.FLOODGATE_PROPERTY_RUNS ?? 150);
const RANK: Record<string, number> = { critical: 2, default: 1, sheddable: 0 };
const rankOf = (p: Priority | undefined) => (p === undefined ? 1 : typeof p === 'number' ? p : RANK[p]);

test('a class is granted up to what the shares above it leave; critical uses the reserve', () => {
  const limiter = concurrency({
    permitLimit: 10,
    classes: { reserve: { critical: 0.2, default: 0.3 } },
  });
  const granted = (priority: Priority, n = 1) => limiter.tryAcquire(n, priority).granted;
  // Sheddable: 10 × (1 − 0.2 − 0.3) = 5 permits.
  for (let i = 0; i < 5; i++) assert.ok(granted('sheddable'), `sheddable ${i + 1} of 5`);
  assert.equal(granted('sheddable'), false, 'sheddable stops at 50 %');
  // Default: up to 8 held (the critical 20 % stays).
  for (let i = 0; i < 3; i++) assert.ok(granted('default'), `default ${i + 6} of 8`);
  assert.equal(granted('default'), false, 'default stops at 80 %');
  assert.ok(granted('critical', 2), 'critical takes its whole share');
  assert.equal(granted('critical'), false, 'and no more than the limit');
});

test('a request without a class is of the default class; numbers rank between and beyond', () => {
  const limiter = concurrency({ permitLimit: 4, classes: { reserve: { critical: 0.5 } } });
  assert.ok(limiter.tryAcquire(2).granted);
  assert.equal(limiter.tryAcquire(1).granted, false, 'default may hold 2 of 4');
  assert.ok(limiter.tryAcquire(1, 3).granted, 'rank 3 is above critical: no share is kept from it');
  assert.ok(limiter.tryAcquire(1, 'critical').granted);
});

test('a partition keeps the shares of its own limit, and setLimit keeps the classes', () => {
  const spec = concurrency({ permitLimit: 5, classes: { reserve: { critical: 0.4 } } });
  const byKey = partitioned({ limiter: spec, key: (k: string) => k });
  for (const key of ['a', 'b']) {
    assert.ok(byKey.tryAcquire(key, 3, 'sheddable').granted, key);
    assert.equal(byKey.tryAcquire(key, 1, 'sheddable').granted, false, `${key}: 3 of 5 for sheddable`);
    assert.ok(byKey.tryAcquire(key, 2, 'critical').granted, `${key}: critical into the reserve`);
  }
  spec.setLimit(10);
  assert.ok(byKey.tryAcquire('c', 6, 'sheddable').granted, '60 % of the new limit');
  assert.equal(byKey.tryAcquire('c', 1, 'sheddable').granted, false);
});

test('a queued sheddable waiter is not served into the reserve; a critical waiter behind it is', async () => {
  const clock = manualClock(0, false);
  const limiter = concurrency({
    permitLimit: 4,
    queueLimit: 10,
    clock,
    classes: { reserve: { critical: 0.5 } },
  });
  const held = [limiter.tryAcquire(1, 'sheddable'), limiter.tryAcquire(1, 'sheddable')];
  held.push(limiter.tryAcquire(2, 'critical'));
  assert.ok(held.every((l) => l.granted));
  const shed = limiter.acquire(1, { priority: 'sheddable' });
  const crit = limiter.acquire(1, { priority: 'critical' });
  let shedDone = false;
  let critLease: Lease | undefined;
  shed.then(() => {
    shedDone = true;
  });
  crit.then((l) => {
    critLease = l;
  });
  held[2].release(); // 2 held, both sheddable: a critical waiter fits, a sheddable one (ceiling 2) does not
  await flush();
  assert.ok(critLease?.granted, 'the critical waiter is served');
  assert.equal(shedDone, false, 'the sheddable waiter still waits: it would go above its share');
  held[0].release(); // 2 held (a sheddable one and the critical waiter's): still at the sheddable ceiling
  await flush();
  assert.equal(shedDone, false, 'still at its share');
  held[1].release();
  await flush();
  assert.equal(shedDone, true, 'served once under its share');
});

test('bad classes are refused at construction, naming the option and the value', () => {
  assert.throws(
    () => concurrency({ permitLimit: 4, classes: { reserve: { critical: 1 } } }),
    /concurrency: classes: reserve\.critical must be a share from 0 to below 1; got 1/,
  );
  assert.throws(
    () => concurrency({ permitLimit: 4, classes: { reserve: { urgent: 0.1 } } }),
    /reserve\.urgent names no class/,
  );
  assert.throws(
    () => concurrency({ permitLimit: 4, classes: { reserve: { critical: 0.6, default: 0.5 } } }),
    /reserve shares must sum below 1; got 1\.1/,
  );
  assert.throws(
    () => concurrency({ permitLimit: 4, classes: { share: {} } as never }),
    /concurrency: classes.*share/,
  );
  assert.throws(() => concurrency({ permitLimit: 4, classes: 0.2 as never }), /concurrency: classes/);
  assert.throws(() => concurrency({ permitLimit: 4 }).tryAcquire(1, 'urgent' as never), /priority/);
});

// The model: held per class; a request of rank r is granted iff held + n ≤ ceiling(r), the ceiling being the
// limit less the shares of every class above r (floored, at least 1).
const priority = fc.constantFrom<Priority | undefined>(undefined, 'critical', 'default', 'sheddable', 5, -1);
const ops = fc.array(
  fc.oneof(
    {
      weight: 3,
      arbitrary: fc.record({
        op: fc.constant('take' as const),
        permits: fc.integer({ min: 1, max: 3 }),
        priority,
      }),
    },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), pick: fc.nat() }) },
  ),
  { maxLength: 60 },
);
const reserve = fc.record(
  {
    critical: fc.double({ min: 0, max: 0.45, noNaN: true }),
    default: fc.double({ min: 0, max: 0.45, noNaN: true }),
  },
  { requiredKeys: [] },
);

test('property: a grant never leaves more held than the class may use; critical is refused only when full', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 12 }), reserve, ops, (limit, shares, script) => {
      const limiter = concurrency({ permitLimit: limit, classes: { reserve: shares } });
      const ceiling = (rank: number) => {
        let reserved = 0;
        for (const [name, share] of Object.entries(shares)) if (RANK[name] > rank) reserved += share;
        return reserved === 0 ? limit : Math.max(1, Math.floor(limit * (1 - reserved)));
      };
      const live: { lease: Lease; permits: number }[] = [];
      let held = 0;
      for (const step of script) {
        if (step.op === 'release') {
          if (live.length === 0) continue;
          const [one] = live.splice(step.pick % live.length, 1);
          one.lease.release();
          held -= one.permits;
          continue;
        }
        if (step.permits > limit) continue;
        const rank = rankOf(step.priority);
        const lease = limiter.tryAcquire(step.permits, step.priority);
        assert.equal(lease.granted, held + step.permits <= ceiling(rank), `rank ${rank}, ${held} held`);
        if (rank >= 2 && held + step.permits <= limit) assert.ok(lease.granted, 'critical refused with room');
        if (lease.granted) {
          held += step.permits;
          live.push({ lease, permits: step.permits });
        }
        assert.ok(held <= limit);
      }
    }),
    { numRuns: RUNS },
  );
});
