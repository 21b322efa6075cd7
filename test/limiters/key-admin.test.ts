import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  chain,
  concurrency,
  fixedWindow,
  type KeyState,
  type Lease,
  lockout,
  partitioned,
  slidingWindow,
  tokenBucket,
} from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';

const byKey = (k: string) => k;

test('state: undefined for a key never seen; what its next request meets for a live one', () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({ key: byKey, limiter: fixedWindow({ permitLimit: 3, window: 1000, clock }) });
  assert.equal(limiter.state('nobody'), undefined);
  assert.equal(limiter.size, 0, 'reading creates no partition');
  limiter.tryAcquire('a');
  clock.set(400);
  limiter.tryAcquire('a');
  const state: KeyState | undefined = limiter.state('a');
  assert.deepEqual(state, { limit: 3, remaining: 1, resetAfterMs: 600, lockedForMs: 0, queued: 0 });
});

test('reset: as if never seen (a fixed window, a sliding window, a token bucket)', () => {
  const clock = manualClock(0, false);
  for (const spec of [
    fixedWindow({ permitLimit: 2, window: 1000, clock }),
    slidingWindow({ permitLimit: 2, window: 1000, segmentsPerWindow: 4, clock }),
    tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: 1000, clock }),
  ]) {
    const limiter = partitioned({ key: byKey, limiter: spec });
    limiter.tryAcquire('a');
    limiter.tryAcquire('a');
    assert.equal(limiter.tryAcquire('a').granted, false, spec.algorithm.kind);
    limiter.reset('a');
    assert.equal(limiter.state('a'), undefined, `${spec.algorithm.kind}: dropped, as never seen`);
    assert.ok(limiter.tryAcquire('a').granted);
    assert.ok(limiter.tryAcquire('a').granted);
    assert.equal(limiter.tryAcquire('a').granted, false);
    limiter.reset('unknown'); // not an error
  }
});

test('reset: a grant made before it can no longer refund into the fresh window', () => {
  const clock = manualClock(0);
  const limiter = partitioned({
    key: byKey,
    limiter: fixedWindow({ permitLimit: 2, window: 1000, queueLimit: 1, clock }),
  });
  const early = limiter.tryAcquire('a');
  limiter.tryAcquire('a');
  const waiting = limiter.acquire('a'); // keeps the partition live through the reset
  limiter.reset('a');
  return waiting.then((served) => {
    assert.ok(served.granted, 'the waiter fits the fresh window');
    assert.ok(limiter.tryAcquire('a').granted);
    early.refund();
    assert.equal(limiter.tryAcquire('a').granted, false, 'the old grant gave nothing back to the new window');
  });
});

test('reset wakes the queued waiters that now fit, in order, and no more', async () => {
  const clock = manualClock(0);
  const limiter = partitioned({
    key: byKey,
    limiter: fixedWindow({ permitLimit: 2, window: 60_000, queueLimit: 5, clock }),
  });
  limiter.tryAcquire('a', 2);
  const served: number[] = [];
  const waiters = [1, 2, 3].map((n) => limiter.acquire('a').then((l) => (l.granted ? served.push(n) : 0)));
  assert.deepEqual(limiter.state('a')?.queued, 3);
  limiter.reset('a');
  await Promise.resolve();
  await Promise.resolve();
  assert.deepEqual(served, [1, 2]);
  assert.equal(limiter.state('a')?.queued, 1, 'the third still waits for the next window');
  clock.advance(60_000);
  await Promise.all(waiters);
  assert.deepEqual(served, [1, 2, 3]);
});

test('lock: every request rejected with reason locked and retryAfterMs the time left; unlock and expiry end it', () => {
  const clock = manualClock(0, false);
  const limiter = partitioned({ key: byKey, limiter: fixedWindow({ permitLimit: 5, window: 1000, clock }) });
  limiter.tryAcquire('a');
  limiter.lock('a', '1h');
  clock.set(1000);
  const lease = limiter.tryAcquire('a');
  assert.equal(lease.granted, false);
  assert.equal(lease.reason, 'locked');
  assert.equal(lease.retryAfterMs, 3_599_000, 'the lock, never the window');
  assert.equal(lease.key, 'a');
  assert.equal(limiter.state('a')?.lockedForMs, 3_599_000);
  assert.ok(limiter.tryAcquire('b').granted, 'other keys are untouched');
  limiter.unlock('a');
  assert.ok(limiter.tryAcquire('a').granted);
  assert.equal(limiter.state('a')?.lockedForMs, 0);

  limiter.lock('never-seen', 500);
  assert.equal(limiter.state('never-seen')?.lockedForMs, 500, 'a key may be locked before its first request');
  assert.equal(limiter.tryAcquire('never-seen').reason, 'locked');
  clock.advance(500);
  assert.ok(limiter.tryAcquire('never-seen').granted, 'the lock ended by itself');
  limiter.unlock('nobody'); // not an error
});

test('lock answers the key’s queued requests at once; acquire of a locked key is rejected, not queued', async () => {
  const clock = manualClock(0);
  const limiter = partitioned({
    key: byKey,
    limiter: concurrency({ permitLimit: 1, queueLimit: 3, clock }),
  });
  const held = limiter.tryAcquire('a');
  const waiting = limiter.acquire('a');
  limiter.lock('a', 2000);
  const answered = await waiting;
  assert.equal(answered.reason, 'locked');
  assert.equal(answered.retryAfterMs, 2000);
  const later = await limiter.acquire('a');
  assert.equal(later.reason, 'locked');
  assert.equal(limiter.state('a')?.queued, 0);
  held.release();
});

test('charge and giveBack without a request; a concurrency give-back returns only what charge took', () => {
  const clock = manualClock(0, false);
  const windowed = partitioned({ key: byKey, limiter: fixedWindow({ permitLimit: 5, window: 1000, clock }) });
  windowed.charge('a', 4);
  assert.equal(windowed.state('a')?.remaining, 1, 'charge starts a key never seen');
  windowed.charge('a', 10);
  assert.equal(windowed.state('a')?.remaining, 0, 'a penalty may go past zero');
  windowed.giveBack('a', 12);
  assert.equal(windowed.state('a')?.remaining, 3);
  windowed.giveBack('a', 100);
  assert.equal(windowed.state('a')?.remaining, 5, 'never past full');
  windowed.giveBack('unknown', 1);
  assert.equal(windowed.state('unknown'), undefined);

  const sliding = partitioned({
    key: byKey,
    limiter: slidingWindow({ permitLimit: 4, window: 1000, segmentsPerWindow: 4, clock }),
  });
  sliding.tryAcquire('s', 2);
  clock.advance(250);
  sliding.tryAcquire('s', 2);
  sliding.giveBack('s', 3);
  assert.equal(
    sliding.state('s')?.remaining,
    3,
    'newest segment first, then the older one still in the window',
  );

  const held = partitioned({ key: byKey, limiter: concurrency({ permitLimit: 3, clock }) });
  const lease = held.tryAcquire('c');
  held.charge('c', 1);
  assert.equal(held.state('c')?.remaining, 1);
  held.giveBack('c', 3);
  assert.equal(held.state('c')?.remaining, 2, 'the lease’s permit stays held');
  lease.release();
  assert.equal(held.state('c')?.remaining, 3);
});

test('bad input names the operation and the value', () => {
  const limiter = partitioned({ key: byKey, limiter: fixedWindow({ permitLimit: 5, window: 1000 }) });
  assert.throws(() => limiter.lock('a', -1), /partitioned\.lock: duration .* got -1/);
  assert.throws(() => limiter.lock('a', '10 years' as never), /partitioned\.lock: duration/);
  assert.throws(() => limiter.charge('a', 1.5), RangeError);
  assert.throws(() => limiter.charge('a', -1), /partitioned\.charge: permits .* got -1/);
  assert.throws(() => limiter.giveBack('a', '2' as never), TypeError);
  assert.throws(() => limiter.state(42 as never), /partitioned\.state: key must be a string; got 42/);
  assert.throws(() => limiter.reset(undefined as never), /partitioned\.reset: key must be a string/);
});

test('chains: the same key in every partitioned member; state per member and the tightest', () => {
  const clock = manualClock(0, false);
  const perKey = partitioned({ key: byKey, limiter: fixedWindow({ permitLimit: 5, window: 1000, clock }) });
  const perKeyBucket = partitioned({
    key: byKey,
    limiter: tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: 1000, clock }),
  });
  const global = fixedWindow({ permitLimit: 100, window: 1000, clock });
  const both = chain(perKey, global, perKeyBucket);
  assert.equal(both.state('a'), undefined);
  both.tryAcquire('a');
  const state = both.state('a');
  assert.equal(state?.remaining, 2, 'the bucket is the tightest');
  assert.equal(state?.limit, 3);
  assert.equal(state?.members.length, 3);
  assert.equal(state?.members[0]?.remaining, 4);
  assert.equal(state?.members[1], undefined, 'a member without keys has no key state');

  both.lock('a', 5000);
  const locked = both.tryAcquire('a');
  assert.equal(locked.reason, 'locked');
  assert.equal(locked.retryAfterMs, 5000);
  assert.equal(global.statistics().available, 99, 'a locked request costs no member anything');
  assert.equal(both.state('a')?.lockedForMs, 5000);
  both.unlock('a');
  both.charge('a', 2);
  assert.equal(perKey.state('a')?.remaining, 2);
  assert.equal(perKeyBucket.state('a')?.remaining, 0);
  both.giveBack('a', 1);
  assert.equal(perKeyBucket.state('a')?.remaining, 1);
  both.reset('a');
  assert.equal(both.state('a'), undefined);
});

test('a chain waiter queued on one member is answered locked when another member locks its key meanwhile', async () => {
  const clock = manualClock(0);
  const global = fixedWindow({ permitLimit: 1, window: 1000, queueLimit: 5, clock });
  const perKey = partitioned({ key: byKey, limiter: fixedWindow({ permitLimit: 5, window: 1000, clock }) });
  const both = chain(global, perKey);
  both.tryAcquire('x');
  const waiting = both.acquire('a');
  perKey.lock('a', 10_000);
  clock.advance(1000);
  const lease = await waiting;
  assert.equal(lease.reason, 'locked');
  assert.equal(lease.retryAfterMs, 9000);
  assert.equal(perKey.state('a')?.remaining, 5, 'charged nothing');
});

test('property: concurrency never holds more than its limit, whatever the order of acquires, releases, resets, charges and give-backs', async () => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('acquire' as const), permits: fc.integer({ min: 1, max: 3 }) }),
    fc.record({ kind: fc.constant('release' as const), index: fc.nat() }),
    fc.record({ kind: fc.constant('reset' as const) }),
    fc.record({ kind: fc.constant('charge' as const), permits: fc.integer({ min: 0, max: 4 }) }),
    fc.record({ kind: fc.constant('giveBack' as const), permits: fc.integer({ min: 0, max: 4 }) }),
    fc.record({ kind: fc.constant('lock' as const) }),
    fc.record({ kind: fc.constant('unlock' as const) }),
  );
  const settled = () => new Promise((resolve) => setImmediate(resolve));
  await fc.assert(
    fc.asyncProperty(fc.array(op, { maxLength: 40 }), fc.integer({ min: 1, max: 4 }), async (ops, limit) => {
      const clock = manualClock(0, false);
      const limiter = partitioned({
        key: byKey,
        limiter: concurrency({ permitLimit: limit, queueLimit: 6, clock }),
      });
      const live: { lease: Lease; permits: number }[] = [];
      const waiting: Promise<void>[] = [];
      let held = 0;
      const admit = (lease: Lease, permits: number) => {
        if (!lease.granted) return;
        held += permits;
        live.push({ lease, permits });
        assert.ok(held <= limit, `held ${held} > limit ${limit}`);
      };
      for (const o of ops) {
        if (o.kind === 'acquire') {
          if (o.permits > limit) continue;
          waiting.push(limiter.acquire('k', o.permits).then((lease) => admit(lease, o.permits)));
        } else if (o.kind === 'release') {
          if (live.length === 0) continue;
          const [gone] = live.splice(o.index % live.length, 1);
          gone.lease.release();
          held -= gone.permits;
        } else if (o.kind === 'reset') limiter.reset('k');
        else if (o.kind === 'charge') limiter.charge('k', o.permits);
        else if (o.kind === 'giveBack') limiter.giveBack('k', o.permits);
        else if (o.kind === 'lock') limiter.lock('k', 1000);
        else limiter.unlock('k');
        await settled();
        // What the limiter says is held never exceeds the limit either (remaining ≥ 0 always).
        const state = limiter.state('k');
        if (state) assert.ok(state.remaining >= 0 && state.remaining <= limit);
      }
      // Everyone still queued is served once the holders leave (a charge is given back by the reset).
      let done = false;
      const all = Promise.all(waiting).finally(() => {
        done = true;
      });
      limiter.reset('k');
      for (let round = 0; !done; round++) {
        assert.ok(round < 100, 'a waiter is never served');
        for (const gone of live.splice(0)) {
          held -= gone.permits;
          gone.lease.release();
        }
        await settled();
      }
      await all;
    }),
    { numRuns: 200 },
  );
});

test('types: memory answers synchronously, the Redis store with promises; KeyState and ChainKeyState', () => {
  const limiter = partitioned({ key: byKey, limiter: fixedWindow({ permitLimit: 1, window: 1000 }) });
  const state: KeyState | undefined = limiter.state('a');
  // @ts-expect-error memory is synchronous: no promise
  limiter.state('a')?.then;
  // @ts-expect-error a key is a string
  assert.throws(() => limiter.reset(42));
  const both = chain(limiter);
  const members: readonly (KeyState | undefined)[] | undefined = both.state('a')?.members;
  // @ts-expect-error lock takes a duration: a number of ms or a string such as '15m'
  assert.throws(() => limiter.lock('a', '15 minutes'));
  assert.equal(state, undefined);
  assert.equal(members, undefined);
});

test("a partitioned lockout(): state() shows the lockout's own time left, unlock() lifts it and its failures", () => {
  const clock = manualClock(0, false);
  const logins = partitioned({
    key: byKey,
    limiter: lockout({ failures: 3, within: '1m', lockFor: '10s', clock }),
  });
  for (let i = 0; i < 3; i++) assert.equal(logins.tryAcquire('alice').granted, true); // three failures
  clock.set(2000);
  assert.equal(logins.tryAcquire('alice').reason, 'locked');
  assert.equal(logins.state('alice')?.lockedForMs, 8000);
  logins.unlock('alice');
  assert.equal(logins.state('alice')?.lockedForMs, 0);
  assert.equal(logins.tryAcquire('alice').granted, true, 'support staff unlocked her');
});
