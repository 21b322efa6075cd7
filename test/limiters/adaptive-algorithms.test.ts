import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AimdLimit } from '../../src/algorithms/limits/aimd.ts';
import { GradientLimit } from '../../src/algorithms/limits/gradient.ts';
import type { Limit, WindowSample } from '../../src/algorithms/limits/limit.ts';
import { VegasLimit } from '../../src/algorithms/limits/vegas.ts';

const bounds = { initialLimit: 20, minLimit: 1, maxLimit: 200, backoffRatio: 0.9 };
const probe = { probeLimit: 3, probeWindows: 2, probeIntervalMs: 1e9, shiftWindows: 1e9 };

/** A scripted sequence: each window's mean latency, with the window using the whole limit. */
function run(limit: Limit, rtts: readonly number[], start = 0, dropped = false): number[] {
  const seen: number[] = [];
  rtts.forEach((rtt, i) => {
    const window: WindowSample = {
      now: (start + i + 1) * 100,
      count: dropped ? 0 : 20,
      dropped: dropped ? 20 : 0,
      avgRttMs: dropped ? Number.NaN : rtt,
      minRttMs: dropped ? Number.NaN : rtt,
      maxInflight: Math.floor(limit.limit),
    };
    seen.push(limit.update(window));
  });
  return seen;
}

const repeat = (n: number, value: number) => Array.from({ length: n }, () => value);
const nonIncreasing = (xs: number[]) => xs.every((x, i) => i === 0 || x <= xs[i - 1]);

for (const [name, make] of [
  ['gradient', () => new GradientLimit({ ...bounds, ...probe, tolerance: 1.5, smoothing: 0.2 })],
  ['vegas', () => new VegasLimit({ ...bounds, ...probe })],
] as const) {
  test(`${name}: probes the no-load latency at the probe limit first, then resumes from the initial limit`, () => {
    const limit = make();
    assert.equal(limit.limit, 3);
    assert.deepEqual(run(limit, [12, 10]), [3, 20]);
  });

  test(`${name}: grows while latency stays at the baseline, converges down when it rises, recovers after`, () => {
    const limit = make();
    run(limit, [10, 10]);
    const growing = run(limit, repeat(10, 10), 2);
    assert.ok(growing.at(-1)! > 40, `grew: ${growing.join(' ')}`);
    const peak = limit.limit;
    const falling = run(limit, repeat(40, 40), 12);
    assert.ok(nonIncreasing(falling), `fell monotonically: ${falling.join(' ')}`);
    assert.ok(falling.at(-1)! < peak / 2, `fell: ${falling.join(' ')}`);
    const recovering = run(limit, repeat(15, 10), 52);
    assert.ok(recovering.at(-1)! > falling.at(-1)! * 2, `recovered: ${recovering.join(' ')}`);
  });

  test(`${name}: never grows on steady drops (every lease a timeout) and ends at minLimit`, () => {
    const limit = make();
    run(limit, [10, 10]);
    run(limit, repeat(5, 10), 2);
    const before = limit.limit;
    const seen = run(limit, repeat(200, 0), 7, true);
    assert.ok(nonIncreasing([before, ...seen]), seen.join(' '));
    assert.equal(seen.at(-1), 1);
  });

  test(`${name}: a level shift (latency up for good, whatever the limit) is re-probed and the limit recovers`, () => {
    const limit = new (make().constructor as new (o: object) => Limit)({
      ...bounds,
      ...probe,
      shiftWindows: 5,
      tolerance: 1.5,
      smoothing: 0.2,
    });
    run(limit, [10, 10]);
    run(limit, repeat(10, 10), 2);
    const high = limit.limit;
    // The dependency is now 3× slower at any concurrency: after 5 congested windows the probe measures 30.
    const seen = run(limit, repeat(40, 30), 12);
    assert.ok(seen.includes(3), `probed: ${seen.join(' ')}`);
    assert.ok(seen.at(-1)! >= high * 0.5, `recovered toward ${high}: ${seen.join(' ')}`);
  });
}

for (const [name, make] of [
  ['gradient', () => new GradientLimit({ ...bounds, ...probe, tolerance: 1.5, smoothing: 0.2 })],
  ['vegas', () => new VegasLimit({ ...bounds, ...probe })],
  ['aimd', () => new AimdLimit({ ...bounds, ...probe, tolerance: 1.5, timeoutMs: Number.POSITIVE_INFINITY })],
] as const) {
  test(`${name}: a window that used under half the limit does not grow it, and moves it halfway to twice the use`, () => {
    const limit = make();
    run(limit, [10, 10]);
    const window = { now: 1000, count: 20, dropped: 0, avgRttMs: 10, minRttMs: 10, maxInflight: 5 };
    assert.equal(limit.update(window), 15, 'an unused limit is not known to be safe (RFC 7661)');
    assert.equal(limit.update({ ...window, now: 1100 }), 12.5);
    assert.equal(limit.update({ ...window, now: 1200, maxInflight: 0 }), 6.25);
  });
}

test('aimd: +1 per used window, × backoffRatio on a drop or a window above the timeout, never past the bounds', () => {
  const limit = new AimdLimit({ ...bounds, ...probe, tolerance: 1.25, timeoutMs: 50 });
  assert.deepEqual(run(limit, [10, 10, 10]), [21, 22, 23]);
  assert.equal(run(limit, [60], 3)[0], 23 * 0.9);
  const drops = run(limit, repeat(100, 0), 4, true);
  assert.ok(nonIncreasing(drops));
  assert.equal(drops.at(-1), 1);
  const up = run(limit, repeat(300, 10), 104);
  assert.equal(up.at(-1), 200);
});

test('aimd without a timeout: probes the no-load latency, cuts above tolerance × it, grows under it, re-probes a level shift', () => {
  const limit = new AimdLimit({
    ...bounds,
    ...probe,
    shiftWindows: 5,
    tolerance: 1.25,
    timeoutMs: Number.POSITIVE_INFINITY,
  });
  assert.equal(limit.limit, 3, 'probing first');
  assert.deepEqual(run(limit, [12, 10]), [3, 20]);
  assert.deepEqual(run(limit, [12, 12, 13], 2), [21, 22, 22 * 0.9], 'the threshold is 1.25 × 10 ms');
  // The dependency is now 3× slower at any concurrency: after 5 congested windows (and a cut of a quarter or
  // more) the probe measures 30, and 36 ms is under the new threshold.
  const seen = run(limit, repeat(12, 30), 5);
  assert.ok(seen.includes(3), `probed: ${seen.join(' ')}`);
  const after = run(limit, repeat(5, 36), 17);
  assert.ok(
    after.every((x, i) => i === 0 || x === after[i - 1] + 1),
    `grows at 1.2× the new baseline: ${after.join(' ')}`,
  );
});
