import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fixedWindow } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';

test('grants permitLimit per window, then rejects with the time left in the window', () => {
  const clock = manualClock(0, false);
  const limiter = fixedWindow({ permitLimit: 3, window: '1s', clock });
  const leases = [0, 1, 2, 3].map(() => limiter.tryAcquire());
  assert.deepEqual(
    leases.map((l) => [l.granted, l.remaining]),
    [
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ],
  );
  assert.equal(leases[3].reason, 'limit');
  assert.equal(leases[3].retryAfterMs, 1000);
  assert.equal(leases[0].resetAfterMs, 1000);
});

test('retryAfterMs at every point of a window is the time left, never a full window when less is left', () => {
  const clock = manualClock(0, false);
  const limiter = fixedWindow({ permitLimit: 2, window: 500, clock });
  for (let window = 0; window < 3; window++) {
    const start = window * 500;
    clock.set(start);
    assert.ok(limiter.tryAcquire(2).granted);
    for (let t = start; t < start + 500; t += 7) {
      clock.set(t);
      const lease = limiter.tryAcquire();
      assert.equal(lease.granted, false, `t=${t}`);
      assert.equal(lease.retryAfterMs, start + 500 - t, `t=${t}`);
      assert.ok(lease.retryAfterMs! > 0 && lease.retryAfterMs! <= 500);
    }
  }
});

test('windows restart at exact multiples of the window from t = 0, even after long idleness', () => {
  const clock = manualClock(100, false);
  const limiter = fixedWindow({ permitLimit: 1, window: 1000, clock }); // t = 0 is clock 100
  assert.ok(limiter.tryAcquire().granted);
  clock.set(100 + 1000 * 1_000_000 + 999); // a million windows later, near the end of one
  assert.ok(limiter.tryAcquire().granted);
  const rejected = limiter.tryAcquire();
  assert.equal(rejected.retryAfterMs, 1);
  clock.advance(1);
  assert.ok(limiter.tryAcquire().granted);
});

test('a burst at the end of one window and the start of the next passes 2 × permitLimit (documented)', () => {
  const clock = manualClock(0, false);
  const limiter = fixedWindow({ permitLimit: 5, window: 1000, clock });
  clock.set(999);
  assert.equal([...Array(5)].filter(() => limiter.tryAcquire().granted).length, 5);
  clock.set(1000);
  assert.equal([...Array(6)].filter(() => limiter.tryAcquire().granted).length, 5);
});

test('a rejected request consumes nothing; countRejected charges it', () => {
  const clock = manualClock(0, false);
  const plain = fixedWindow({ permitLimit: 2, window: 1000, clock });
  plain.tryAcquire(2);
  plain.tryAcquire();
  assert.deepEqual(plain.statistics(), { available: 0, queued: 0, granted: 1, rejected: 1 });
  const counting = fixedWindow({ permitLimit: 3, window: 1000, clock, countRejected: true });
  counting.tryAcquire(2);
  assert.equal(counting.tryAcquire(2).granted, false);
  assert.equal(counting.tryAcquire(1).granted, false, 'the rejected 2 were charged');
});

test('a zero-permit probe is granted while a permit is left and consumes nothing', () => {
  const clock = manualClock(0, false);
  const limiter = fixedWindow({ permitLimit: 1, window: 1000, clock });
  assert.equal(limiter.tryAcquire(0).granted, true);
  assert.equal(limiter.tryAcquire(0).granted, true);
  assert.ok(limiter.tryAcquire(1).granted);
  const probe = limiter.tryAcquire(0);
  assert.equal(probe.granted, false);
  assert.equal(probe.retryAfterMs, 1000);
  assert.deepEqual(limiter.statistics(), { available: 0, queued: 0, granted: 1, rejected: 0 });
});

test('asking for more than the limit is a RangeError', async () => {
  const limiter = fixedWindow({ permitLimit: 3, window: 1000 });
  assert.throws(() => limiter.tryAcquire(4), RangeError);
  assert.throws(() => limiter.tryAcquire(-1), RangeError);
  assert.throws(() => limiter.tryAcquire(1.5), RangeError);
  await assert.rejects(() => limiter.acquire(4), RangeError);
});
