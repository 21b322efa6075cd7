import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { backoffMs } from '../../src/fetch/backoff.ts';
import { defaultIsFailure, isNetworkError } from '../../src/fetch/failure.ts';
import { RetryBudget } from '../../src/fetch/retry-budget.ts';
import { SlidingCounts } from '../../src/fetch/sliding-counts.ts';
import { AdaptiveThrottle, type AdaptiveThrottleOptions, PROBE_LEVEL } from '../../src/fetch/throttle.ts';
import { handClock } from './server.ts';

function throttle(extra: Partial<AdaptiveThrottleOptions> = {}) {
  const clock = handClock(0);
  let draw = 0.5;
  const t = new AdaptiveThrottle({
    k: 2,
    historyMs: 10_000,
    buckets: 10,
    maxRejection: 1,
    minRequests: 0,
    maxEntries: 100,
    clock,
    random: () => draw,
    ...extra,
  });
  return { t, clock, setDraw: (x: number) => (draw = x) };
}

describe('sliding counts', () => {
  test('a count leaves the window one slot-length early at the latest, and never late', () => {
    const clock = handClock(0);
    const counts = new SlidingCounts(1000, 10, clock.now());
    counts.add(50, 1, 1); // slot [0, 100)
    counts.add(950, 2, 0); // slot [900, 1000)
    assert.equal(counts.total(999), 3);
    assert.equal(
      counts.total(1000),
      2,
      'the first slot leaves when the window has moved a whole slot past it',
    );
    assert.equal(counts.marked(1000), 0);
    assert.equal(counts.total(1899), 2);
    assert.equal(counts.total(1900), 0);
    assert.ok(counts.empty(5000));
  });

  test('idle for longer than the window reads as empty; counting starts again', () => {
    const counts = new SlidingCounts(1000, 10, 0);
    counts.add(0, 5, 5);
    counts.add(123_456, 1, 0);
    assert.equal(counts.total(123_456), 1);
    assert.equal(counts.marked(123_456), 0);
  });

  test('property: the counts equal a naive count of the adds within the slots of the window', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.nat(3), fc.nat(3)), { maxLength: 60 }),
        (steps) => {
          const counts = new SlidingCounts(1000, 10, 0);
          const log: Array<[number, number, number]> = [];
          let now = 0;
          for (const [dt, total, marked] of steps) {
            now += dt;
            counts.add(now, total, marked);
            log.push([now, total, marked]);
            // The slot of `now` starts at floor(now / 100) × 100; the window is the ten slots up to it.
            const from = (Math.floor(now / 100) - 9) * 100;
            const inWindow = log.filter(([t]) => t >= from);
            assert.equal(
              counts.total(now),
              inWindow.reduce((s, [, x]) => s + x, 0),
            );
            assert.equal(
              counts.marked(now),
              inWindow.reduce((s, [, , y]) => s + y, 0),
            );
          }
        },
      ),
    );
  });
});

describe('adaptive throttle', () => {
  test('the probability is max(0, (requests − k·accepts) / (requests + 1))', () => {
    const { t } = throttle();
    assert.equal(t.probability('a'), 0, 'no history');
    for (let i = 0; i < 6; i++) t.record('a', false);
    for (let i = 0; i < 2; i++) t.record('a', true);
    // requests 8, accepts 2: (8 − 4) / 9
    assert.equal(t.probability('a'), 4 / 9);
    for (let i = 0; i < 2; i++) t.record('a', true);
    // requests 10, accepts 4: (10 − 8) / 11
    assert.equal(t.probability('a'), 2 / 11);
    t.record('a', true);
    assert.equal(t.probability('a'), 1 / 12, 'requests 11, accepts 5');
    t.record('a', true);
    assert.equal(t.probability('a'), 0, 'requests 12, accepts 6: 0 once half are accepted');
    assert.equal(t.probability('b'), 0, 'partitions are separate');
  });

  test('property: the probability is the formula over the history, clamped to [0, maxRejection]; an accept at PROBE_LEVEL or more weighs 1 / (1 − p)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { maxLength: 200 }),
        fc.double({ min: 1, max: 5, noNaN: true }),
        fc.double({ min: 0.01, max: 1, noNaN: true }),
        (outcomes, k, maxRejection) => {
          const { t } = throttle({ k, maxRejection });
          // The naive model: counts replayed with the formula.
          let requests = 0;
          let accepts = 0;
          const p = () =>
            requests === 0
              ? 0
              : Math.min(Math.max(0, (requests - k * accepts) / (requests + 1)), maxRejection);
          for (const accepted of outcomes) {
            t.record('a', accepted);
            if (accepted) accepts += p() >= Math.min(PROBE_LEVEL, maxRejection) ? 1 / (1 - p()) : 1;
            requests++;
            assert.ok(Math.abs(t.probability('a') - p()) < 1e-9, `${t.probability('a')} ≠ ${p()}`);
          }
        },
      ),
    );
  });

  test('k changes how many failures are tolerated', () => {
    const { t } = throttle({ k: 1.1 });
    for (let i = 0; i < 10; i++) t.record('a', i % 2 === 0);
    // requests 10, accepts 5: (10 − 5.5) / 11
    assert.equal(t.probability('a'), 4.5 / 11);
  });

  test('a call is rejected when the draw is below the probability, and the rejection counts as a request', () => {
    const { t, setDraw } = throttle();
    for (let i = 0; i < 9; i++) t.record('a', false);
    assert.equal(t.probability('a'), 0.9);
    setDraw(0.9);
    assert.equal(t.reject('a'), undefined, 'a draw at the probability passes');
    setDraw(0.899);
    assert.equal(t.reject('a'), 0.9);
    // requests 10 now (9 failures + 1 local rejection): 10 / 11
    assert.equal(t.probability('a'), 10 / 11);
  });

  test('maxRejection caps the probability; minRequests holds it at 0 for a thin history', () => {
    const capped = throttle({ maxRejection: 0.8 });
    for (let i = 0; i < 50; i++) capped.t.record('a', false);
    assert.equal(capped.t.probability('a'), 0.8);
    const thin = throttle({ minRequests: 10 });
    for (let i = 0; i < 9; i++) thin.t.record('a', false);
    assert.equal(thin.t.probability('a'), 0);
    thin.t.record('a', false);
    assert.equal(thin.t.probability('a'), 10 / 11);
  });

  test('the history slides: failures older than the history no longer count', () => {
    const { t, clock } = throttle();
    for (let i = 0; i < 20; i++) t.record('a', false);
    clock.advance(5000);
    for (let i = 0; i < 10; i++) t.record('a', true);
    // 30 requests; the first accept (at 20 / 21) weighs 21, the others 1: 30 accepts
    assert.equal(t.probability('a'), 0);
    t.record('a', false);
    clock.advance(5000);
    // the failures' slot has left: 11 requests, 9 accepts (the weighted one left with them)
    assert.equal(t.probability('a'), 0);
    clock.advance(5000);
    // the failures' slot has left: 10 requests, 10 accepts
    assert.equal(t.probability('a'), 0);
  });

  test('recovery: an accept at the cap weighs as the calls it was drawn for; below PROBE_LEVEL an accept counts 1', () => {
    const { t, clock, setDraw } = throttle({ maxRejection: 0.95 });
    for (let i = 0; i < 1000; i++) t.record('a', false);
    assert.equal(t.probability('a'), 0.95);
    // The server is back: every call that goes through is accepted.
    setDraw(0.99); // above the cap: each call goes
    assert.equal(t.reject('a'), undefined);
    t.record('a', true);
    // 1001 requests, 1 / (1 − 0.95) = 20 accepts: (1001 − 40) / 1002, still at the cap
    assert.equal(t.probability('a'), 0.95);
    let previous = 0.95;
    let probes = 1;
    while (previous >= PROBE_LEVEL) {
      t.record('a', true);
      probes++;
      previous = t.probability('a');
    }
    // each probe weighed 1 / (1 − p): off the floor after about (1001 − 0.9 × 1002) / (2 × 20) ≈ 2.5 probes
    assert.equal(probes, 3);
    // Below PROBE_LEVEL an accept counts 1: with 1003 requests, (1003 − k·A) / 1004 becomes (1004 − k·(A + 1)) / 1005.
    const before = t.probability('a');
    t.record('a', true);
    assert.ok(Math.abs(t.probability('a') - (before * 1004 + 1 - 2) / 1005) < 1e-9);
    clock.advance(10_000);
    assert.equal(t.probability('a'), 0, 'a history later, the outage is forgotten');
  });

  test('maxRejection 1: the first probe accepted after an outage weighs as the whole history', () => {
    const { t } = throttle({ maxRejection: 1 });
    for (let i = 0; i < 1000; i++) t.record('a', false);
    assert.equal(t.probability('a'), 1000 / 1001);
    t.record('a', true);
    // weighs 1001: (1001 − 2 × 1001) / 1002 < 0
    assert.equal(t.probability('a'), 0);
  });

  test('without the weight, the same probes would leave the probability at the cap', () => {
    const { t } = throttle({ maxRejection: 0.95 });
    for (let i = 0; i < 1000; i++) t.record('a', false);
    for (let i = 0; i < 3; i++) t.record('a', true);
    // unweighted: (1003 − 6) / 1004 = 0.993, capped at 0.95; weighted it is below PROBE_LEVEL
    assert.ok(t.probability('a') < PROBE_LEVEL);
  });
});

describe('retry budget', () => {
  function budget(ratio = 0.2, minRetries = 0) {
    const clock = handClock(0);
    return {
      b: new RetryBudget({ ratio, minRetries, windowMs: 10_000, buckets: 10, maxEntries: 10, clock }),
      clock,
    };
  }

  test('retries stay at or under ratio × calls, plus minRetries', () => {
    const { b } = budget(0.2, 1);
    for (let i = 0; i < 10; i++) b.call('a');
    // 1 + 0.2 × 10 = 3
    assert.equal(b.remaining('a'), 3);
    assert.equal(b.tryRetry('a'), true);
    assert.equal(b.tryRetry('a'), true);
    assert.equal(b.tryRetry('a'), true);
    assert.equal(b.tryRetry('a'), false, 'spent');
    assert.equal(b.remaining('a'), 0);
    for (let i = 0; i < 5; i++) b.call('a');
    assert.equal(b.tryRetry('a'), true, 'more calls, more room: 1 + 0.2 × 15 = 4');
    assert.equal(b.tryRetry('a'), false);
    assert.equal(b.tryRetry('b'), true, 'another partition has its own budget (minRetries)');
  });

  test('spent retries leave the window with their calls', () => {
    const { b, clock } = budget(0.5);
    for (let i = 0; i < 4; i++) b.call('a');
    assert.equal(b.tryRetry('a'), true);
    assert.equal(b.tryRetry('a'), true);
    assert.equal(b.tryRetry('a'), false);
    clock.advance(10_000);
    assert.equal(b.tryRetry('a'), false, 'the calls left too: nothing to retry against');
    for (let i = 0; i < 2; i++) b.call('a');
    assert.equal(b.tryRetry('a'), true);
  });
});

describe('backoff and failures', () => {
  test('backoff: full jitter under a ceiling that doubles and is capped', () => {
    const top = () => 0.999_999;
    assert.equal(
      backoffMs(1, 100, 5000, () => 0),
      0,
    );
    assert.ok(backoffMs(1, 100, 5000, top) < 100);
    assert.ok(backoffMs(2, 100, 5000, top) < 200 && backoffMs(2, 100, 5000, top) > 199);
    assert.ok(backoffMs(3, 100, 5000, top) < 400);
    assert.ok(backoffMs(10, 100, 5000, top) < 5000 && backoffMs(10, 100, 5000, top) > 4999);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.nat(10_000),
        fc.nat(100_000),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, base, extra, r) => {
          const ms = backoffMs(attempt, base, base + extra, () => r);
          return ms >= 0 && ms <= Math.min(base + extra, base * 2 ** (attempt - 1));
        },
      ),
    );
  });

  test('default failures: network errors, timeouts and 5xx but 501 and 505', () => {
    for (const status of [500, 502, 503, 504, 599])
      assert.equal(defaultIsFailure({ status }), true, String(status));
    for (const status of [200, 204, 301, 400, 404, 429, 501, 505]) {
      assert.equal(defaultIsFailure({ status }), false, String(status));
    }
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    assert.equal(defaultIsFailure({ error: new TypeError('fetch failed', { cause: refused }) }), true);
    assert.equal(defaultIsFailure({ error: new DOMException('timed out', 'TimeoutError') }), true);
    assert.equal(isNetworkError(Object.assign(new Error('x'), { code: 'UND_ERR_HEADERS_TIMEOUT' })), true);
    assert.equal(defaultIsFailure({ error: new DOMException('aborted', 'AbortError') }), false);
    assert.equal(defaultIsFailure({ error: new TypeError('Invalid URL') }), false);
  });
});
