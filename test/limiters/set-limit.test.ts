import assert from 'node:assert/strict';
import { test } from 'node:test';
import { concurrency, fixedWindow, partitioned, slidingWindow, tokenBucket } from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

test('fixedWindow.setLimit: counted permits stay counted; a raise is available at once, a cut waits for the next window', () => {
  const clock = manualClock(0, false);
  const limiter = fixedWindow({ permitLimit: 5, window: 1000, clock });
  for (let i = 0; i < 4; i++) assert.equal(limiter.tryAcquire().granted, true);
  limiter.setLimit(2);
  assert.equal(limiter.limit, 2);
  const cut = limiter.tryAcquire();
  assert.equal(cut.granted, false, '4 counted, limit 2');
  assert.equal(cut.limit, 2);
  assert.equal(cut.retryAfterMs, 1000);
  assert.throws(
    () => limiter.tryAcquire(3),
    RangeError,
    'more than the new limit is a RangeError, as at construction',
  );
  clock.advance(1000);
  assert.equal(limiter.tryAcquire(2).granted, true);
  assert.equal(limiter.tryAcquire().granted, false);
  limiter.setLimit(10);
  const raised = limiter.tryAcquire(8);
  assert.equal(raised.granted, true, 'the raise is available in this same window');
  assert.equal(raised.remaining, 0);
  assert.deepEqual(limiter.statistics(), { available: 0, queued: 0, granted: 6, rejected: 2 });
});

test('slidingWindow.setLimit: permits taken stay in their segments and come back on time under the new limit', () => {
  const clock = manualClock(0, false);
  const limiter = slidingWindow({ permitLimit: 4, window: 1000, segmentsPerWindow: 4, clock });
  assert.equal(limiter.tryAcquire(3).granted, true); // segment 0
  clock.advance(500);
  limiter.setLimit(3);
  const lease = limiter.tryAcquire();
  assert.equal(lease.granted, false);
  assert.equal(lease.retryAfterMs, 500, 'the three permits leave with segment 0, at t = 1000');
  clock.advance(500);
  assert.equal(limiter.tryAcquire(3).granted, true);
});

test('tokenBucket.setLimit: the bucket refills at the old rate up to now first (Go SetLimitAt), then at the new one', () => {
  const clock = manualClock(0, false);
  const limiter = tokenBucket({
    tokenLimit: 100,
    tokensPerPeriod: 1,
    period: 10,
    replenishment: 'continuous',
    clock,
  });
  assert.equal(limiter.tryAcquire(100).granted, true);
  clock.advance(100); // 10 tokens at the old rate
  limiter.setLimit(100, 10); // ten times faster from now on
  clock.advance(10); // + 10 at the new rate
  assert.equal(
    limiter.statistics().available,
    20,
    'not 110 × the new rate: the past is counted at the old one',
  );
  // Lowering the size drops tokens above it; a raise adds none.
  limiter.setLimit(5, 5);
  assert.equal(limiter.statistics().available, 5);
  limiter.setLimit(50, 5);
  assert.equal(limiter.statistics().available, 5);
  assert.equal(limiter.tryAcquire(40).retryAfterMs, 70, '35 missing at 5 per 10 ms');
});

test('tokenBucket.setLimit, stepped: whole periods so far at the old rate, the next boundary at the new', () => {
  const clock = manualClock(0, false);
  const limiter = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 100, clock });
  assert.equal(limiter.tryAcquire(10).granted, true);
  clock.advance(250); // two boundaries passed: 2 tokens
  limiter.setLimit(10, 5);
  assert.equal(limiter.statistics().available, 2);
  clock.advance(50); // the boundary at 300 adds 5
  assert.equal(limiter.statistics().available, 7);
});

test('setLimit validates like construction: a RangeError naming the argument and the value', () => {
  const fw = fixedWindow({ permitLimit: 5, window: 1000 });
  assert.throws(() => fw.setLimit(0), {
    name: 'RangeError',
    message: 'fixedWindow.setLimit: permitLimit must be a whole number ≥ 1; got 0',
  });
  assert.throws(() => fw.setLimit(2.5), /fixedWindow\.setLimit: permitLimit .* got 2\.5/);
  assert.throws(() => fw.setLimit('5' as never), {
    name: 'TypeError',
    message: /fixedWindow\.setLimit: permitLimit must be a whole number; got "5"/,
  });
  assert.throws(() => slidingWindow({ permitLimit: 5, window: 1000, segmentsPerWindow: 2 }).setLimit(-1), {
    name: 'RangeError',
    message: /slidingWindow\.setLimit: permitLimit .* got -1/,
  });
  assert.throws(() => concurrency({ permitLimit: 5 }).setLimit(Number.NaN), {
    name: 'RangeError',
    message: /concurrency\.setLimit: permitLimit .* got NaN/,
  });
  const bucket = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 5, period: 1000 });
  assert.throws(() => bucket.setLimit(4), {
    name: 'RangeError',
    message: 'tokenBucket.setLimit: tokensPerPeriod (5) must not exceed tokenLimit (4)',
  });
  assert.throws(() => bucket.setLimit(10, 0), /tokenBucket\.setLimit: tokensPerPeriod .* got 0/);
  assert.equal(fw.limit, 5, 'a refused change changes nothing');
  assert.equal(bucket.limit, 10);
});

test('concurrency.setLimit: a raise admits queued waiters at once, in order', async () => {
  const limiter = concurrency({ permitLimit: 2, queueLimit: 10 });
  const held = [limiter.tryAcquire(), limiter.tryAcquire()];
  const a = track(limiter.acquire());
  const b = track(limiter.acquire(2));
  const c = track(limiter.acquire());
  limiter.setLimit(3);
  await flush();
  assert.equal(a.value?.granted, true);
  assert.equal(b.settled, false, 'held 3 of 3: b needs 2 and blocks c behind it (head-of-line)');
  assert.equal(c.settled, false);
  limiter.setLimit(5);
  await flush();
  assert.equal(b.value?.granted, true);
  assert.equal(b.value?.limit, 5);
  assert.equal(c.settled, false, '2 + 1 + 2 held of 5');
  held[0].release();
  await flush();
  assert.equal(c.value?.granted, true);
});

test('concurrency.setLimit: a cut takes no permit back; they drain, and nothing is granted until under the limit', async () => {
  const limiter = concurrency({ permitLimit: 3, queueLimit: 5 });
  const held = [limiter.tryAcquire(), limiter.tryAcquire(), limiter.tryAcquire()];
  const waiter = track(limiter.acquire());
  limiter.setLimit(1);
  assert.equal(limiter.statistics().available, 0);
  held[0].release();
  held[1].release();
  await flush();
  assert.equal(waiter.settled, false, 'one still held, limit 1');
  assert.equal(limiter.tryAcquire().granted, false);
  held[2].release();
  await flush();
  assert.equal(waiter.value?.granted, true);
  held[2].release(); // idempotent: nothing given back twice
  assert.equal(limiter.statistics().available, 0);
});

test('a waiter asking for more than a lowered limit is rejected with reason limit; the ones behind it are served', async () => {
  const clock = manualClock();
  const limiter = fixedWindow({ permitLimit: 5, window: 1000, queueLimit: 10, clock });
  limiter.tryAcquire(5);
  const big = track(limiter.acquire(4));
  const small = track(limiter.acquire(2));
  limiter.setLimit(3);
  await flush();
  assert.equal(big.value?.granted, false);
  assert.equal(big.value?.reason, 'limit');
  assert.equal(small.settled, false);
  clock.advance(1000); // the timer of the new window serves the one left
  await flush();
  assert.equal(small.value?.granted, true);
  assert.equal(limiter.statistics().queued, 0);
});

test('a lowered token bucket delays the wake-up of its waiters to the new rate', async () => {
  const clock = manualClock();
  const limiter = tokenBucket({ tokenLimit: 4, tokensPerPeriod: 4, period: 100, queueLimit: 4, clock });
  limiter.tryAcquire(4);
  const waiter = track(limiter.acquire(2));
  limiter.setLimit(4, 1);
  clock.advance(100);
  await flush();
  assert.equal(waiter.settled, false, 'one token at t = 100');
  clock.advance(100);
  await flush();
  assert.equal(waiter.value?.granted, true);
});

test('partitions follow the limiter they were built from: every live partition and every new one', () => {
  const clock = manualClock(0, false);
  const perUser = fixedWindow({ permitLimit: 2, window: 1000, clock });
  const byUser = partitioned({ key: (user: string) => user, limiter: perUser });
  assert.equal(byUser.tryAcquire('a', 2).granted, true);
  perUser.setLimit(3);
  assert.equal(byUser.tryAcquire('a').granted, true, 'live partition: 2 counted of 3');
  assert.equal(byUser.tryAcquire('a').granted, false);
  assert.equal(byUser.tryAcquire('b', 3).granted, true, 'new partition');
  assert.equal(byUser.algorithmFor('b').limit, 3);
  assert.equal(byUser.statistics('c').available, 3, 'a key not live yet reports the new limit');
  assert.equal(perUser.tryAcquire(3).granted, true, 'and the limiter itself');
});

test('tiers of different settings change apart; tiers of equal settings share one group of partitions', () => {
  const clock = manualClock(0, false);
  const free = fixedWindow({ permitLimit: 2, window: 1000, clock });
  const pro = fixedWindow({ permitLimit: 5, window: 1000, clock });
  const byUser = partitioned({
    key: (user: string) => user,
    limiter: (key) => (key.startsWith('p') ? pro : free),
  });
  byUser.tryAcquire('f1');
  byUser.tryAcquire('p1');
  free.setLimit(4);
  assert.equal(byUser.tryAcquire('f1', 3).granted, true, 'free: 1 + 3 of 4');
  assert.equal(byUser.tryAcquire('p1', 5).granted, false, 'pro stays at 5: 1 + 5');
  assert.equal(byUser.tryAcquire('p1', 4).granted, true);
  // A new limiter of the free tier's old settings is not in its group any more.
  const old = fixedWindow({ permitLimit: 2, window: 1000, clock });
  const other = partitioned({ key: (user: string) => user, limiter: (key) => (key === 'o' ? old : free) });
  other.tryAcquire('f');
  assert.equal(other.tryAcquire('o', 2).granted, true);
  assert.equal(other.tryAcquire('o').granted, false, 'old settings: 2');
  assert.equal(other.tryAcquire('f', 3).granted, true, 'free: 4');

  // Two limiters of equal settings given to one partitioned limiter share storage: a change is the group's.
  const trial = fixedWindow({ permitLimit: 4, window: 1000, clock });
  const byTrial = partitioned({
    key: (user: string) => user,
    limiter: (key) => (key.startsWith('t') ? trial : free),
  });
  byTrial.tryAcquire('t1');
  byTrial.tryAcquire('f1');
  trial.setLimit(1);
  assert.equal(byTrial.tryAcquire('f1').granted, false, "free's partitions here are in trial's group");
  assert.equal(free.tryAcquire(4).granted, true, 'free itself is unchanged');
});

test('a tiers function that builds a limiter per key still shares storage between equal settings', () => {
  const byUser = partitioned({
    key: (user: string) => user,
    limiter: () => fixedWindow({ permitLimit: 1, window: 1000 }),
  });
  // More keys than the 256 distinct settings a partitioned limiter accepts.
  for (let i = 0; i < 300; i++) assert.equal(byUser.tryAcquire(`u${i}`).granted, true);
});

test('a partitioned concurrency limiter: a raise serves the queues of every partition', async () => {
  const perHost = concurrency({ permitLimit: 1, queueLimit: 5 });
  const byHost = partitioned({ key: (host: string) => host, limiter: perHost });
  byHost.tryAcquire('a');
  byHost.tryAcquire('b');
  const a = track(byHost.acquire('a'));
  const b = track(byHost.acquire('b'));
  perHost.setLimit(2);
  await flush();
  assert.equal(a.value?.granted, true);
  assert.equal(a.value?.key, 'a');
  assert.equal(b.value?.granted, true);
  assert.equal(b.value?.limit, 2);
});
