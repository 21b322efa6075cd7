import assert from 'node:assert/strict';
import { test } from 'node:test';
import { slidingWindow } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';

test('permits come back when their segment leaves the window (4 per 2 s, 4 segments)', () => {
  const clock = manualClock(0, false);
  const limiter = slidingWindow({ permitLimit: 4, window: 2000, segmentsPerWindow: 4, clock });
  clock.set(300); // segment 0: [0, 500)
  assert.ok(limiter.tryAcquire(2).granted);
  clock.set(1200); // segment 2: [1000, 1500)
  assert.ok(limiter.tryAcquire(2).granted);
  clock.set(1999);
  const rejected = limiter.tryAcquire(1);
  assert.equal(rejected.granted, false);
  assert.equal(rejected.retryAfterMs, 1, 'segment 0 leaves at 2000');
  assert.equal(limiter.tryAcquire(3).retryAfterMs, 1001, 'three need segment 2 to leave at 3000');
  clock.set(2000);
  assert.equal(limiter.statistics().available, 2);
  clock.set(2999);
  assert.equal(limiter.statistics().available, 2);
  clock.set(3000);
  assert.equal(limiter.statistics().available, 4);
});

test('retryAfterMs is exact at every point, never more than the true time', () => {
  const clock = manualClock(0, false);
  const limiter = slidingWindow({ permitLimit: 2, window: 1000, segmentsPerWindow: 10, clock });
  clock.set(50); // segment 0
  limiter.tryAcquire();
  clock.set(430); // segment 4
  limiter.tryAcquire();
  for (let t = 430; t < 1000; t += 13) {
    clock.set(t);
    assert.equal(limiter.tryAcquire().retryAfterMs, 1000 - t, `t=${t}`);
    assert.equal(limiter.tryAcquire(2).retryAfterMs, 1400 - t, `t=${t}`);
  }
  clock.set(1000);
  assert.ok(limiter.tryAcquire().granted);
});

test('catch-up after idleness advances as many segments as have passed', () => {
  const clock = manualClock(0, false);
  const limiter = slidingWindow({ permitLimit: 3, window: 300, segmentsPerWindow: 3, clock });
  limiter.tryAcquire(3);
  clock.set(250); // two segments later the permits are still in the window
  assert.equal(limiter.statistics().available, 0);
  clock.set(300);
  assert.equal(limiter.statistics().available, 3);
  limiter.tryAcquire(1);
  clock.set(300 + 100 * 1_000_001 + 50);
  assert.equal(limiter.statistics().available, 3);
  assert.equal(limiter.tryAcquire(3).resetAfterMs, 300 - 50);
});
