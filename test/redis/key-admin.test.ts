/**
 * Key administration on a real redis-server, with both clients: state, reset, lock and unlock, charge and give
 * back, on every algorithm, lone and in chains (the two-number chain path and the general one), with the lock
 * kept in the key's own state (no command per decision for a key that is not locked).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { concurrency, fixedWindow, type KeyState, slidingWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { clients } from './clients.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(() => server.stop());

const byKey = (k: string) => k;

for (const [name, connect] of Object.entries(clients)) {
  test(`${name}: state, lock, unlock and reset of a fixed window; the lock seen by the known-state path`, async (t) => {
    const c = await connect(server.port);
    t.after(() => c.close());
    const clock = { t: 1_000_000, now: () => clock.t };
    const store = redisStore({ client: c.client, timeoutMs: 3000, onUnavailable: 'fail-closed', clock });
    const limiter = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: fixedWindow({ permitLimit: 5, window: 1000 }),
    });
    const pending: Promise<KeyState | undefined> = limiter.state('a');
    // @ts-expect-error on Redis, a promise
    const sync: KeyState | undefined = limiter.state('a');
    await sync;
    assert.equal(await pending, undefined, 'a key Redis does not hold');
    await limiter.tryAcquire('a');
    await limiter.tryAcquire('a');
    clock.t += 400;
    assert.deepEqual(await limiter.state('a'), {
      limit: 5,
      remaining: 3,
      resetAfterMs: 600,
      lockedForMs: 0,
      queued: 0,
    });
    await limiter.lock('a', '1m');
    clock.t += 1000;
    const locked = await limiter.tryAcquire('a');
    assert.equal(locked.granted, false);
    assert.equal(locked.reason, 'locked');
    assert.equal(locked.retryAfterMs, 59_000, 'the lock, never the window');
    assert.equal(locked.remaining, 0);
    assert.equal((await limiter.state('a'))?.lockedForMs, 59_000);
    assert.ok(Number(await c.command('PTTL', `floodgate:{a}:${limiter.name}`)) >= 59_000, 'kept as long');
    assert.ok((await limiter.tryAcquire('b')).granted, 'other keys go through');
    await limiter.unlock('a');
    const after = await limiter.tryAcquire('a');
    assert.ok(after.granted);
    assert.equal(after.remaining, 4, 'the window under the lock was kept and has moved on');
    await limiter.lock('a', 500);
    clock.t += 500;
    assert.ok((await limiter.tryAcquire('a')).granted, 'a lock ends by itself');
    await limiter.reset('a');
    assert.equal(await limiter.state('a'), undefined);
    await limiter.reset('never');
    await limiter.unlock('never');
    await limiter.giveBack('never', 1);
    assert.equal(await limiter.state('never'), undefined, 'unknown keys: no error, nothing written');
    await limiter.lock('fresh', 2000);
    assert.equal(
      (await limiter.tryAcquire('fresh')).reason,
      'locked',
      'a key may be locked before its first request',
    );
    await assert.rejects(limiter.lock('a', 0), /store\.partitioned\.lock: duration/);
    await assert.rejects(limiter.lock('a', 1e13), /store\.partitioned\.lock: duration must be at most/);
    await assert.rejects(limiter.charge('a', -1), /store\.partitioned\.charge: permits .* got -1/);
    await assert.rejects(limiter.state(7 as never), /store\.partitioned\.state: key must be a string; got 7/);
  });

  test(`${name}: charge and give back on a sliding window and a token bucket; reset as if never seen`, async (t) => {
    const c = await connect(server.port);
    t.after(() => c.close());
    const clock = { t: 1_000_000, now: () => clock.t };
    const store = redisStore({ client: c.client, timeoutMs: 3000, onUnavailable: 'fail-closed', clock });
    const sliding = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: slidingWindow({ permitLimit: 4, window: 1000, segmentsPerWindow: 4 }),
    });
    await sliding.tryAcquire('s', 2);
    clock.t += 250;
    await sliding.tryAcquire('s', 2);
    await sliding.giveBack('s', 3);
    assert.equal((await sliding.state('s'))?.remaining, 3, 'newest segment first, then the older one');
    await sliding.charge('s', 10);
    assert.equal((await sliding.state('s'))?.remaining, 0);
    await sliding.reset('s');
    assert.equal((await sliding.tryAcquire('s', 4)).granted, true, 'as if never seen');

    const bucket = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: 1000 }),
    });
    await bucket.charge('b', 2);
    assert.equal((await bucket.state('b'))?.remaining, 1, 'charge starts a key never seen');
    await bucket.giveBack('b', 10);
    assert.equal(await bucket.state('b'), undefined, 'back to full: nothing left in Redis');
  });

  test(`${name}: chains reject a locked member with reason locked (two-number path and general path)`, async (t) => {
    const c = await connect(server.port);
    t.after(() => c.close());
    const clock = { t: 1_000_000, now: () => clock.t };
    const store = redisStore({ client: c.client, timeoutMs: 3000, onUnavailable: 'fail-closed', clock });
    const window = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: fixedWindow({ permitLimit: 10, window: 1000 }),
    });
    const bucket = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 1000 }),
    });
    const sliding = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: slidingWindow({ permitLimit: 10, window: 1000, segmentsPerWindow: 2 }),
    });
    for (const [members, label] of [
      [[window, bucket], 'two-number chain'],
      [[window, sliding], 'general chain'],
    ] as const) {
      const both = store.chain(...members);
      assert.ok((await both.tryAcquire('k')).granted, label);
      await members[1].lock('k', 3000);
      const lease = await both.tryAcquire('k');
      assert.equal(lease.reason, 'locked', label);
      assert.equal(lease.retryAfterMs, 3000, label);
      assert.equal((await members[0].state('k'))?.remaining, 9, `${label}: a locked request costs nothing`);
      await members[1].unlock('k');
      assert.ok((await both.tryAcquire('k')).granted, label);
      await members[0].reset('k');
      await members[1].reset('k');
    }
  });

  test(`${name}: concurrency: a lock, reset keeping held leases, charge and give back`, async (t) => {
    const c = await connect(server.port);
    t.after(() => c.close());
    const store = redisStore({ client: c.client, timeoutMs: 3000, onUnavailable: 'fail-closed' });
    const limiter = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: concurrency({ permitLimit: 3 }),
    });
    const held = await limiter.tryAcquire('c');
    assert.ok(held.granted);
    await limiter.lock('c', '10s');
    const locked = await limiter.tryAcquire('c');
    assert.equal(locked.reason, 'locked');
    assert.ok(locked.retryAfterMs! > 9000 && locked.retryAfterMs! <= 10_000);
    assert.ok((await limiter.state('c'))!.lockedForMs > 9000);
    await limiter.charge('c', 1);
    await limiter.reset('c');
    const state = await limiter.state('c');
    assert.equal(state?.lockedForMs, 0);
    assert.equal(state?.remaining, 2, 'the held lease stays held; the charge and the lock are gone');
    await limiter.charge('c', 2);
    assert.equal((await limiter.state('c'))?.remaining, 0);
    await limiter.giveBack('c', 5);
    assert.equal((await limiter.state('c'))?.remaining, 2, 'only what charge took comes back');
    held.release();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(await limiter.state('c'), undefined, 'nothing held: nothing left in Redis');
  });

  test(`${name}: a chain's state per member and the tightest; reset and unlock wake this process's waiters`, async (t) => {
    const c = await connect(server.port);
    t.after(() => c.close());
    const clock = { t: 1_000_000, now: () => clock.t };
    const store = redisStore({ client: c.client, timeoutMs: 3000, onUnavailable: 'fail-closed', clock });
    const window = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: fixedWindow({ permitLimit: 2, window: 60_000, queueLimit: 4 }),
    });
    const bucket = store.partitioned({
      name: uniqueName(),
      key: byKey,
      limiter: tokenBucket({ tokenLimit: 5, tokensPerPeriod: 1, period: 1000 }),
    });
    const both = store.chain(window, bucket);
    assert.equal(await both.state('k'), undefined);
    await both.tryAcquire('k');
    const state = await both.state('k');
    assert.equal(state?.remaining, 1, 'the window is the tightest');
    assert.deepEqual(
      state?.members.map((m) => m?.remaining),
      [1, 4],
    );
    await both.lock('k', 5000);
    assert.equal((await both.state('k'))?.lockedForMs, 5000);
    await both.unlock('k');
    await both.charge('k', 1);
    assert.equal((await bucket.state('k'))?.remaining, 3);
    await both.giveBack('k', 1);
    assert.equal((await bucket.state('k'))?.remaining, 4);

    // A waiter sleeping until the 60 s window ends asks again as soon as the key is reset.
    await window.tryAcquire('w', 2);
    const waiting = window.acquire('w');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal((await window.state('w'))?.queued, 1);
    await window.reset('w');
    const timeout = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 5000).unref());
    const served = await Promise.race([waiting, timeout]);
    assert.ok(served !== 'late' && served.granted, 'woken by the reset, not by the end of the window');

    // A lock answers a waiter at once, as in memory.
    await window.tryAcquire('w');
    const queued = window.acquire('w');
    await new Promise((resolve) => setTimeout(resolve, 50));
    await window.lock('w', 30_000);
    const answered = await Promise.race([queued, timeout]);
    assert.ok(answered !== 'late' && answered.reason === 'locked');
    await both.reset('k');
    await window.reset('w');
  });
}
