import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tokenBucket } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';

test('stepped: starts full, adds tokensPerPeriod at each exact boundary, never above the limit', () => {
  const clock = manualClock(0, false);
  const limiter = tokenBucket({ tokenLimit: 5, tokensPerPeriod: 2, period: '100ms', clock });
  assert.ok(limiter.tryAcquire(5).granted);
  clock.set(99);
  const rejected = limiter.tryAcquire(3);
  assert.equal(rejected.retryAfterMs, 101, 'two periods: boundaries at 100 and 200');
  assert.equal(limiter.tryAcquire(1).retryAfterMs, 1);
  clock.set(100);
  assert.equal(limiter.statistics().available, 2);
  clock.set(10_000_000);
  assert.equal(limiter.statistics().available, 5, 'idle time builds no credit beyond the limit');
});

test('continuous: tokens in proportion to elapsed time', () => {
  const clock = manualClock(0, false);
  const limiter = tokenBucket({
    tokenLimit: 10,
    tokensPerPeriod: 1,
    period: 100,
    replenishment: 'continuous',
    clock,
  });
  assert.ok(limiter.tryAcquire(10).granted);
  clock.set(30);
  const lease = limiter.tryAcquire(1);
  assert.equal(lease.granted, false);
  assert.ok(Math.abs(lease.retryAfterMs! - 70) < 1e-6);
  clock.set(100);
  assert.ok(limiter.tryAcquire(1).granted);
  clock.set(350);
  assert.equal(limiter.statistics().available, 2);
  assert.ok(Math.abs(limiter.tryAcquire(3).retryAfterMs! - 50) < 1e-6);
});

test('stepped and continuous differ inside a period', () => {
  const clock = manualClock(0, false);
  const stepped = tokenBucket({ tokenLimit: 4, tokensPerPeriod: 4, period: 1000, clock });
  const smooth = tokenBucket({
    tokenLimit: 4,
    tokensPerPeriod: 4,
    period: 1000,
    clock,
    replenishment: 'continuous',
  });
  stepped.tryAcquire(4);
  smooth.tryAcquire(4);
  clock.set(500);
  assert.equal(stepped.statistics().available, 0);
  assert.equal(smooth.statistics().available, 2);
});
