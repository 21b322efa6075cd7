import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  chain,
  concurrency,
  fixedWindow,
  type Lease,
  partitioned,
  type RejectionReason,
  slidingWindow,
  tokenBucket,
} from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

function frozen(start = 0) {
  let t = start;
  return {
    now: () => t,
    set(value: number) {
      t = value;
    },
  };
}

describe('overdraw: a reservation larger than the limit', () => {
  test('without the option it is a RangeError naming the limit, on every entry point', async () => {
    const bucket = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, queueLimit: 500 });
    assert.throws(() => bucket.tryAcquire(101), {
      name: 'RangeError',
      message: /the limit \(100\); got 101/,
    });
    await assert.rejects(bucket.acquire(101), { name: 'RangeError', message: /the limit \(100\); got 101/ });
    const both = chain(bucket, fixedWindow({ permitLimit: 1000, window: 1000, overdraw: true }));
    assert.throws(() => both.tryAcquire(101), { name: 'RangeError', message: /the limit \(100\); got 101/ });
    assert.equal(bucket.statistics().available, 100, 'nothing charged');
  });

  test('the option is validated: a boolean, and only on the time-based limiters', () => {
    assert.throws(() => fixedWindow({ permitLimit: 1, window: 1, overdraw: 'yes' as never }), {
      name: 'TypeError',
      message: /fixedWindow: overdraw must be a boolean; got "yes"/,
    });
    assert.throws(() => tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: 1, overdraw: 1 as never }), {
      name: 'TypeError',
      message: /tokenBucket: overdraw must be a boolean/,
    });
    assert.throws(() => concurrency({ permitLimit: 1, overdraw: true } as never), {
      name: 'TypeError',
      message: /overdraw/,
    });
    assert.equal(fixedWindow({ permitLimit: 1, window: 1, overdraw: false }).tryAcquire().granted, true);
  });

  test('fixed window: granted only with nothing counted in the window; the excess is carried as debt', () => {
    const clock = frozen();
    const window = fixedWindow({ permitLimit: 100, window: 1000, clock, unit: 'tokens', overdraw: true });
    window.tryAcquire(1);
    const early = window.tryAcquire(250);
    assert.equal(early.granted, false, 'one permit counted: the whole limit is not free');
    assert.equal(early.reason, 'limit');
    assert.equal(early.retryAfterMs, 1000, 'the next window starts empty');
    clock.set(1000);
    const big = window.tryAcquire(250);
    assert.equal(big.granted, true);
    assert.equal(big.remaining, 0);
    assert.equal(window.statistics().available, 0);
    // 150 over the limit: the next window pays 100, the one after 50.
    assert.equal(window.tryAcquire(1).retryAfterMs, 2000);
    clock.set(2000);
    assert.equal(window.tryAcquire(1).granted, false);
    clock.set(3000);
    assert.equal(window.statistics().available, 50);
    assert.equal(window.tryAcquire(50).granted, true);
    assert.equal(window.tryAcquire(1).granted, false);
  });

  test('token bucket: granted from a full bucket, which goes below zero and refills from there', () => {
    const clock = frozen();
    const bucket = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, clock, overdraw: true });
    const big = bucket.tryAcquire(130);
    assert.equal(big.granted, true);
    assert.equal(bucket.statistics().available, 0);
    assert.equal(bucket.tryAcquire(1).retryAfterMs, 4000, 'the debt of 30 and one token: 4 refills');
    const again = bucket.tryAcquire(130);
    assert.equal(again.granted, false);
    assert.equal(again.retryAfterMs, 13_000, 'until the bucket is full again');
    clock.set(13_000);
    assert.equal(bucket.tryAcquire(130).granted, true);
  });

  test('sliding window: the charge counts in its segment and leaves with it, one window later', () => {
    const clock = frozen();
    const window = slidingWindow({
      permitLimit: 100,
      window: 1000,
      segmentsPerWindow: 4,
      clock,
      overdraw: true,
    });
    assert.equal(window.tryAcquire(300).granted, true);
    clock.set(750);
    assert.equal(window.tryAcquire(1).granted, false);
    clock.set(1000);
    assert.equal(window.statistics().available, 100, 'its segment left the window');
    window.tryAcquire(1);
    assert.equal(window.tryAcquire(300).granted, false, 'a permit counted');
  });

  test('a settled overdraw lease: a lower cost gives back by the refund rules, a higher one is more debt', () => {
    const clock = frozen();
    const bucket = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, clock, overdraw: true });
    bucket.tryAcquire(150).settle(120);
    assert.equal(bucket.tryAcquire(1).retryAfterMs, 3000, 'debt 20 and one token');
    const other = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, clock, overdraw: true });
    other.tryAcquire(150).settle(170);
    assert.equal(other.tryAcquire(1).retryAfterMs, 8000, 'debt 70 and one token');
  });

  test('queued: waits until the whole limit is free; smaller ones behind it do not overtake it', async () => {
    const clock = manualClock();
    const bucket = tokenBucket({
      tokenLimit: 100,
      tokensPerPeriod: 10,
      period: 1000,
      clock,
      overdraw: true,
      queueLimit: 1000,
    });
    bucket.tryAcquire(50);
    const big = track(bucket.acquire(200));
    const small = track(bucket.acquire(10));
    await flush();
    assert.equal(big.settled, false);
    assert.equal(small.settled, false, 'behind the big one (oldest-first)');
    clock.advance(4000);
    await flush();
    assert.equal(big.settled, false, '90 tokens');
    clock.advance(1000);
    await flush();
    assert.equal(big.value?.granted, true, 'full: granted');
    assert.equal(small.settled, false, 'the bucket is at -100 now');
    clock.advance(11_000);
    await flush();
    assert.equal(small.value?.granted, true);
  });

  test('a lowered limit keeps a waiting overdraw (it still can be served)', async () => {
    const clock = manualClock();
    const window = fixedWindow({ permitLimit: 100, window: 1000, clock, overdraw: true, queueLimit: 500 });
    window.tryAcquire(1);
    const big = track(window.acquire(300));
    window.setLimit(50);
    await flush();
    assert.equal(big.settled, false);
    clock.advance(1000);
    await flush();
    assert.equal(big.value?.granted, true);
  });

  test('chains: all or nothing; each member decides by its own overdraw setting', () => {
    const clock = frozen();
    const tokens = tokenBucket({
      tokenLimit: 100,
      tokensPerPeriod: 10,
      period: 1000,
      clock,
      unit: 'tokens',
      overdraw: true,
    });
    const daily = fixedWindow({ permitLimit: 1000, window: 86_400_000, clock, unit: 'tokens' });
    const requests = fixedWindow({ permitLimit: 2, window: 1000, clock });
    const limits = chain(tokens, daily, requests);
    const lease = limits.tryAcquire(250);
    assert.equal(lease.granted, true, 'tokens overdraws, daily has room, requests counts one');
    assert.equal(tokens.statistics().available, 0);
    assert.equal(daily.statistics().available, 750);
    assert.equal(requests.statistics().available, 1);
    // The bucket is not full now: nothing is charged anywhere.
    assert.equal(limits.tryAcquire(250).granted, false);
    assert.equal(daily.statistics().available, 750);
    assert.equal(requests.statistics().available, 1);
    // Above the daily member's limit, which does not overdraw: a RangeError, nothing charged.
    clock.set(100_000);
    assert.throws(() => limits.tryAcquire(1001), { name: 'RangeError', message: /\(1000\); got 1001/ });
    assert.equal(tokens.statistics().available, 100);
  });

  test('partitioned: each key overdraws its own partition', () => {
    const clock = frozen();
    const perKey = partitioned({
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: 10, window: 1000, clock, overdraw: true }),
    });
    assert.equal(perKey.tryAcquire('a', 25).granted, true);
    assert.equal(perKey.tryAcquire('a', 25).granted, false);
    assert.equal(perKey.tryAcquire('b', 25).granted, true);
    assert.throws(
      () =>
        partitioned({
          key: (k: string) => k,
          limiter: fixedWindow({ permitLimit: 10, window: 1000 }),
        }).tryAcquire('a', 11),
      RangeError,
    );
  });
});

test('types: overdraw is a boolean of the time-based limiters; the rejection reason names too-large', () => {
  const check = (lease: Lease) => {
    tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: 1, overdraw: true });
    slidingWindow({ permitLimit: 1, window: 1, segmentsPerWindow: 1, overdraw: false });
    // @ts-expect-error overdraw is a boolean
    fixedWindow({ permitLimit: 1, window: 1, overdraw: 'yes' });
    // @ts-expect-error a concurrency limiter has no overdraw
    concurrency({ permitLimit: 1, overdraw: true });
    const reason: RejectionReason | undefined = lease.reason;
    if (reason === 'too-large') return lease.limit;
    return 0;
  };
  assert.equal(typeof check, 'function');
});
