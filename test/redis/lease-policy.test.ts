/**
 * `leases: 'auto'` (issue 26 §3): which keys the policy leases, on an injected clock, no Redis. A key is promoted
 * once this process decides it PROMOTE_COUNT times within INTERVAL_MS, never before; a hot key that stays below a
 * quarter of that rate is demoted within DEMOTE_AFTER_MS and an interval or two, and one above it never is.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DEMOTE_AFTER_MS, INTERVAL_MS, LeasePolicy, PROMOTE_COUNT } from '../../src/redis/lease-policy.ts';

function policy(blocked: () => boolean = () => false) {
  let now = 0;
  const demoted: { key: string; at: number }[] = [];
  const p = new LeasePolicy(
    () => now,
    (key) => {
      if (blocked()) return false;
      demoted.push({ key, at: now });
      return true;
    },
  );
  return {
    p,
    demoted,
    at(t: number) {
      now = t;
    },
  };
}

/** The most decisions of a sorted list of times within any half-open span of `span` ms. */
function densest(times: number[], span: number): number {
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < times.length; hi++) {
    while (times[hi] - times[lo] >= span) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

test('a key is leased only once it had PROMOTE_COUNT decisions within INTERVAL_MS, and from that decision on', () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 400 }), (gaps) => {
      const { p, at } = policy();
      const times: number[] = [];
      let t = 0;
      for (const gap of gaps) {
        t += gap / 4; // down to a quarter of a millisecond apart
        times.push(t);
        at(t);
        const leased = p.leased('k');
        // Never before PROMOTE_COUNT decisions fitted in one interval.
        if (leased) assert.ok(densest(times, INTERVAL_MS) >= PROMOTE_COUNT, `leased at ${t}`);
      }
    }),
    { numRuns: 300 },
  );
});

test('a steady rate at or above PROMOTE_COUNT per INTERVAL_MS is promoted within two intervals', () => {
  fc.assert(
    fc.property(
      fc.double({ min: 0.05, max: INTERVAL_MS / PROMOTE_COUNT, noNaN: true }),
      fc.nat(1000),
      (gap, start) => {
        const { p, at } = policy();
        let leasedAt: number | undefined;
        for (let t = start; t < start + 3 * INTERVAL_MS; t += gap) {
          at(t);
          if (p.leased('k') && leasedAt === undefined) leasedAt = t;
        }
        assert.ok(leasedAt !== undefined && leasedAt - start <= 2 * INTERVAL_MS, `leased at ${leasedAt}`);
      },
    ),
    { numRuns: 200 },
  );
});

test('a hot key below a quarter of the promotion rate is demoted within DEMOTE_AFTER_MS and two intervals; above it, never', () => {
  const quarter = PROMOTE_COUNT / INTERVAL_MS / 4; // decisions per ms
  fc.assert(
    fc.property(
      fc.double({ min: 0.02, max: 0.95, noNaN: true }),
      fc.double({ min: 1.05, max: 8, noNaN: true }),
      (slow, fast) => {
        for (const [factor, cools] of [
          [slow, true],
          [fast, false],
        ] as const) {
          const { p, at, demoted } = policy();
          let t = 0;
          for (let i = 0; i < PROMOTE_COUNT; i++) {
            t += 1;
            at(t);
            p.leased('k');
          }
          assert.equal(p.isHot('k'), true);
          const gap = 1 / (quarter * factor);
          const cooledAt = t;
          while (t < cooledAt + DEMOTE_AFTER_MS + 2 * INTERVAL_MS + 2 * gap) {
            t += gap;
            at(t);
            p.leased('k');
          }
          if (cools) {
            assert.equal(demoted.length, 1, `demoted at ${slow} of a quarter`);
            assert.ok(
              demoted[0].at - cooledAt <= DEMOTE_AFTER_MS + 2 * INTERVAL_MS + 2 * gap,
              `demoted ${demoted[0].at - cooledAt} ms after it cooled`,
            );
            assert.equal(p.isHot('k'), false);
          } else {
            assert.deepEqual(demoted, [], `kept at ${fast} × a quarter`);
          }
        }
      },
    ),
    { numRuns: 100 },
  );
});

test('a hot key left alone is demoted at its next decision; one whose batch cannot go back yet stays hot', () => {
  let blocked = true;
  const { p, at, demoted } = policy(() => blocked);
  for (let i = 0; i < PROMOTE_COUNT; i++) {
    at(i);
    p.leased('k');
  }
  at(60_000);
  assert.equal(p.leased('k'), true, 'a take in flight: still leased');
  blocked = false;
  at(60_000 + DEMOTE_AFTER_MS + INTERVAL_MS);
  assert.equal(p.leased('k'), false);
  assert.deepEqual(
    demoted.map((d) => d.key),
    ['k'],
  );
});

test('keys are counted apart, and memory is bounded: cold keys beyond 10 000 an interval stay cold', () => {
  const { p, at } = policy();
  at(0);
  for (let i = 0; i < PROMOTE_COUNT - 1; i++) {
    assert.equal(p.leased('a'), false);
    assert.equal(p.leased('b'), false);
  }
  assert.equal(p.leased('a'), true);
  assert.equal(p.isHot('b'), false);
  for (let i = 0; i < 20_000; i++) p.leased(`cold-${i}`);
  const counted = (p as unknown as { counts: Map<string, number> }).counts.size;
  assert.ok(counted <= 10_000, `${counted} keys counted`);
  // The next interval counts afresh.
  at(INTERVAL_MS);
  p.leased('x');
  assert.equal((p as unknown as { counts: Map<string, number> }).counts.size, 1);
});

test('a clock moved back starts the count afresh (test clocks): no promotion from decisions spread over time', () => {
  const { p, at } = policy();
  at(10_000);
  for (let i = 0; i < PROMOTE_COUNT - 1; i++) p.leased('k');
  at(0);
  for (let i = 0; i < PROMOTE_COUNT - 1; i++) assert.equal(p.leased('k'), false);
});
