import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  chain,
  concurrency,
  fixedWindow,
  type Lease,
  partitioned,
  slidingWindow,
  tokenBucket,
} from '../../src/index.ts';

const RUNS = Number(process.env.FLOODGATE_PROPERTY_RUNS ?? 200);

type Op = { op: 'try' } | { op: 'refund'; pick: number } | { op: 'tick'; dt: number };

const ops = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: fc.constant({ op: 'try' } as Op) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('refund' as const), pick: fc.nat() }) },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant('tick' as const),
        dt: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 400 })),
      }),
    },
  ),
  { maxLength: 300 },
);

interface Grant {
  lease: Lease;
  /** The segment (fixed window: the window) the grant fell in. */
  at: number;
  /** The segment it was refunded in, if refunded. */
  refundedAt?: number;
}

/**
 * With segments of `segmentMs` and `segments` per window: counting each grant in its segment, minus those refunded
 * while their segment was still in the window, no run of `segments` consecutive segments holds more than `limit`.
 * A refund once its segment left the window must change nothing.
 */
function windowProperty(limit: number, segmentMs: number, segments: number, sliding: boolean) {
  fc.assert(
    fc.property(ops, (sequence) => {
      let t = 0;
      const clock = { now: () => t };
      const limiter = sliding
        ? slidingWindow({
            permitLimit: limit,
            window: segmentMs * segments,
            segmentsPerWindow: segments,
            clock,
          })
        : fixedWindow({ permitLimit: limit, window: segmentMs, clock });
      const grants: Grant[] = [];
      const segmentOf = (time: number) => Math.floor(time / segmentMs);
      for (const step of sequence) {
        if (step.op === 'tick') t += step.dt;
        else if (step.op === 'try') {
          const lease = limiter.tryAcquire();
          if (lease.granted) grants.push({ lease, at: segmentOf(t) });
        } else if (grants.length > 0) {
          const grant = grants[step.pick % grants.length];
          const before = limiter.statistics().available;
          const late = segmentOf(t) - grant.at >= segments;
          grant.lease.refund();
          if (late) assert.equal(limiter.statistics().available, before, 'a late refund changes nothing');
          assert.ok(limiter.statistics().available <= limit, 'never above the limit');
          grant.refundedAt ??= segmentOf(t);
        }
        // Every window of `segments` segments ending now.
        const now = segmentOf(t);
        for (let end = Math.max(0, now - segments); end <= now; end++) {
          let count = 0;
          for (const g of grants) {
            if (g.at <= end - segments || g.at > end) continue;
            const effective = g.refundedAt !== undefined && g.refundedAt - g.at < segments;
            if (!effective) count++;
          }
          assert.ok(count <= limit, `${count} unrefunded grants in the window ending at segment ${end}`);
        }
      }
    }),
    { numRuns: RUNS },
  );
}

describe('refunds (Lease.refund, like Go x/time/rate Reservation.Cancel)', () => {
  test('fixed window: never more than the limit in a window, counting refunds made in it', () => {
    windowProperty(3, 100, 1, false);
  });

  test('sliding window: never more than the limit in any window of its segments', () => {
    windowProperty(4, 50, 4, true);
  });

  test('token bucket: a refund never fills above the limit; a full bucket owes nothing', () => {
    fc.assert(
      fc.property(ops, (sequence) => {
        let t = 0;
        const clock = { now: () => t };
        const bucket = tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: 100, clock });
        const leases: Lease[] = [];
        for (const step of sequence) {
          if (step.op === 'tick') t += step.dt;
          else if (step.op === 'try') {
            const lease = bucket.tryAcquire();
            if (lease.granted) leases.push(lease);
          } else if (leases.length > 0) leases[step.pick % leases.length].refund();
          assert.ok(bucket.statistics().available <= 3);
        }
      }),
      { numRuns: RUNS },
    );
  });

  test('a refund gives back once, and the permits are usable at once', () => {
    let t = 0;
    const limiter = fixedWindow({ permitLimit: 2, window: '1m', clock: { now: () => t } });
    const first = limiter.tryAcquire();
    limiter.tryAcquire();
    assert.equal(limiter.tryAcquire().granted, false);
    first.refund();
    first.refund();
    assert.equal(limiter.statistics().available, 1);
    assert.equal(limiter.tryAcquire().granted, true);
    assert.equal(limiter.tryAcquire().granted, false);
    t = 60_000;
    assert.equal(limiter.statistics().available, 2);
  });

  test('a chain refunds every member, exactly once', () => {
    const clock = { now: () => 0 };
    const a = fixedWindow({ permitLimit: 2, window: '1m', clock });
    const b = partitioned({
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: 5, window: '1m', clock }),
    });
    const both = chain(a, b);
    const lease = both.tryAcquire('alice');
    both.tryAcquire('alice');
    assert.equal(a.statistics().available, 0);
    lease.refund();
    lease.refund();
    assert.equal(a.statistics().available, 1);
    assert.equal(b.statistics('alice').available, 4);
  });

  test('a refund into a dropped partition changes nothing, even when its slot holds another key now', () => {
    let t = 0;
    const clock = { now: () => t };
    const limiter = partitioned({
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: 1, window: 1000, clock }),
      maxPartitions: 1,
    });
    const alice = limiter.tryAcquire('alice');
    t = 1000; // alice's partition is full again: droppable
    const bob = limiter.tryAcquire('bob');
    assert.equal(bob.granted, true, "bob took alice's slot");
    alice.refund();
    assert.equal(limiter.statistics('bob').available, 0, "alice's refund did not go into bob's partition");
  });

  test('concurrency and rejected leases: refund gives nothing', () => {
    const slots = concurrency({ permitLimit: 1 });
    const held = slots.tryAcquire();
    held.refund();
    assert.equal(slots.statistics().available, 0, 'a held permit comes back by release');
    held.release();
    const window = fixedWindow({ permitLimit: 1, window: '1m', clock: { now: () => 0 } });
    window.tryAcquire();
    window.tryAcquire().refund();
    assert.equal(window.statistics().available, 0);
  });
});
