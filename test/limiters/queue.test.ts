import assert from 'node:assert/strict';
import { test } from 'node:test';
import { concurrency, fixedWindow, tokenBucket } from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

test('oldest-first: waiters are served in arrival order and a new request never overtakes them', async () => {
  const clock = manualClock();
  const limiter = fixedWindow({ permitLimit: 2, window: 1000, clock, queueLimit: 10 });
  limiter.tryAcquire(2);
  const a = track(limiter.acquire(2));
  const b = track(limiter.acquire(1));
  clock.advance(1000); // a takes both permits of the new window; b waits on
  await flush();
  assert.equal(a.value?.granted, true);
  assert.equal(b.settled, false);
  clock.advance(1000);
  await flush();
  assert.equal(b.value?.granted, true);
  // One permit is free, but a waiter for two is ahead: a new request must not overtake it.
  const c = track(limiter.acquire(2));
  assert.equal(limiter.tryAcquire(1).granted, false);
  assert.deepEqual(limiter.statistics(), { available: 1, queued: 2, granted: 3, rejected: 1 });
  clock.advance(1000);
  await flush();
  assert.equal(c.value?.granted, true);
});

test('head-of-line: a large waiter at the front blocks smaller ones behind it', async () => {
  const limiter = concurrency({ permitLimit: 3, queueLimit: 10 });
  const held = [limiter.tryAcquire(), limiter.tryAcquire(), limiter.tryAcquire()];
  const big = track(limiter.acquire(3));
  const small = track(limiter.acquire(1));
  held[0].release();
  await flush();
  assert.equal(small.settled, false, 'the 1-permit waiter waits behind the 3-permit one');
  held[1].release();
  held[2].release();
  await flush();
  assert.equal(big.value?.granted, true);
  assert.equal(small.settled, false);
  big.value!.release();
  await flush();
  assert.equal(small.value?.granted, true);
});

test('newest-first: the newest waiter is served first; a full queue evicts the oldest (reason evicted)', async () => {
  const limiter = concurrency({ permitLimit: 1, queueLimit: 2, queueOrder: 'newest-first' });
  const held = limiter.tryAcquire();
  const first = track(limiter.acquire());
  const second = track(limiter.acquire());
  const third = track(limiter.acquire()); // evicts `first`
  await flush();
  assert.equal(first.value?.granted, false);
  assert.equal(first.value?.reason, 'evicted');
  assert.equal(limiter.statistics().queued, 2);
  held.release();
  await flush();
  assert.equal(third.value?.granted, true);
  assert.equal(second.settled, false);
  third.value!.release();
  await flush();
  assert.equal(second.value?.granted, true);
  assert.equal(limiter.statistics().rejected, 1);
});

test('queueLimit counts permits; no room means an immediate queue-full rejection with retryAfterMs', async () => {
  const clock = manualClock();
  const limiter = fixedWindow({ permitLimit: 4, window: 1000, clock, queueLimit: 3 });
  limiter.tryAcquire(4);
  clock.advance(400);
  const waiting = track(limiter.acquire(2));
  const full = await limiter.acquire(2);
  assert.equal(full.granted, false);
  assert.equal(full.reason, 'queue-full');
  assert.equal(full.retryAfterMs, 600);
  const fits = track(limiter.acquire(1));
  clock.advance(600);
  await flush();
  assert.equal(waiting.value?.granted, true);
  assert.equal(fits.value?.granted, true);
  const noQueue = fixedWindow({ permitLimit: 1, window: 1000, clock });
  noQueue.tryAcquire();
  assert.equal((await noQueue.acquire()).reason, 'limit');
});

test('an aborted waiter leaves at once, its promise rejects with the reason, nothing is charged', async () => {
  const clock = manualClock();
  const limiter = fixedWindow({ permitLimit: 1, window: 1000, clock, queueLimit: 1 });
  limiter.tryAcquire();
  const controller = new AbortController();
  const waiting = track(limiter.acquire(1, { signal: controller.signal }));
  assert.equal(limiter.statistics().queued, 1);
  controller.abort(new Error('client went away'));
  await flush();
  assert.equal((waiting.error as Error).message, 'client went away');
  assert.equal(limiter.statistics().queued, 0);
  const next = track(limiter.acquire()); // the room is free again
  clock.advance(1000);
  await flush();
  assert.equal(next.value?.granted, true);
  assert.deepEqual(limiter.statistics(), { available: 0, queued: 0, granted: 2, rejected: 0 });
});

test('abort before the call rejects without queueing; abort after the grant leaves the lease granted', async () => {
  const limiter = concurrency({ permitLimit: 1, queueLimit: 1 });
  const aborted = AbortSignal.abort(new Error('early'));
  await assert.rejects(limiter.acquire(1, { signal: aborted }), /early/);
  const held = limiter.tryAcquire();
  const controller = new AbortController();
  const waiting = track(limiter.acquire(1, { signal: controller.signal }));
  held.release(); // granted synchronously, in this tick
  controller.abort(new Error('too late'));
  await flush();
  assert.equal(waiting.value?.granted, true, 'the grant won; the caller owns the lease');
  waiting.value!.release();
  assert.equal(limiter.statistics().available, 1, 'no permit leaked');
});

test('aborting the waiter at the head unblocks smaller waiters behind it', async () => {
  const limiter = concurrency({ permitLimit: 2, queueLimit: 5 });
  const held = limiter.tryAcquire(2);
  held.release();
  const a = limiter.tryAcquire(1);
  const controller = new AbortController();
  const big = track(limiter.acquire(2, { signal: controller.signal }));
  const small = track(limiter.acquire(1));
  await flush();
  assert.equal(small.settled, false);
  controller.abort();
  await flush();
  assert.ok(big.error);
  assert.equal(small.value?.granted, true);
  a.release();
});

test('one refill wakes many waiters, with a single timer', async () => {
  const clock = manualClock();
  const limiter = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 10, period: 1000, clock, queueLimit: 10 });
  limiter.tryAcquire(10);
  const waiters = [...Array(10)].map(() => track(limiter.acquire()));
  clock.advance(999);
  await flush();
  assert.equal(waiters.filter((w) => w.settled).length, 0);
  clock.advance(1);
  await flush();
  assert.equal(waiters.filter((w) => w.value?.granted).length, 10);
});

test('zero-permit acquire waits for a permit to exist and consumes nothing', async () => {
  const limiter = concurrency({ permitLimit: 1, queueLimit: 1 });
  const held = limiter.tryAcquire();
  const probe = track(limiter.acquire(0));
  await flush();
  assert.equal(probe.settled, false);
  held.release();
  await flush();
  assert.equal(probe.value?.granted, true);
  assert.equal(limiter.statistics().available, 1);
});

test('release is idempotent and Symbol.dispose releases', () => {
  const limiter = concurrency({ permitLimit: 2 });
  const lease = limiter.tryAcquire();
  lease.release();
  lease.release();
  assert.equal(limiter.statistics().available, 2);
  {
    using held = limiter.tryAcquire(2);
    assert.equal(held.granted, true);
    assert.equal(limiter.tryAcquire().granted, false);
  }
  assert.equal(limiter.statistics().available, 2);
  const rejected = (() => {
    limiter.tryAcquire(2);
    return limiter.tryAcquire();
  })();
  assert.equal(rejected.retryAfterMs, undefined, 'a concurrency rejection has no retry time');
  assert.equal(rejected.reason, 'limit');
});
