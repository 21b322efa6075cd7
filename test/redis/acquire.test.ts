/**
 * `acquire` over Redis (Redis TIME, real time, short windows, generous margins): waits locally and is granted
 * when a retry can succeed, charged once; bounded by queueLimit; abortable; newest-first evicts; concurrency
 * waiters wake on a local release and poll for remote ones; leases of a dead holder expire.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { concurrency, fixedWindow, tokenBucket } from '../../src/index.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let store: RedisStore;
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  store = redisStore({ client, timeoutMs: 2000 });
});
after(async () => {
  client.disconnect();
  await server.stop();
});

test('a waiter is granted when the window rolls, and charged once', async () => {
  const limiter = store.limiter(fixedWindow({ permitLimit: 2, window: 300, queueLimit: 4 }), {
    name: uniqueName(),
  });
  assert.ok((await limiter.acquire(2)).granted, '(await limiter.acquire(2)).granted');
  const started = performance.now();
  const waiting = limiter.acquire(1);
  assert.equal((await limiter.statistics()).queued, 1);
  const lease = await waiting;
  const waited = performance.now() - started;
  assert.ok(lease.granted, 'lease.granted');
  assert.ok(waited >= 250 && waited < 5000, `waited ${waited} ms`);
  const stats = await limiter.statistics();
  assert.deepEqual(
    { available: stats.available, queued: stats.queued, granted: stats.granted },
    {
      available: 1,
      queued: 0,
      granted: 2,
    },
  );
});

test('queue-full and limit reasons', async () => {
  const limiter = store.limiter(fixedWindow({ permitLimit: 2, window: 400, queueLimit: 2 }), {
    name: uniqueName(),
  });
  assert.ok((await limiter.tryAcquire(2)).granted, '(await limiter.tryAcquire(2)).granted');
  const first = limiter.acquire(2);
  const full = await limiter.acquire(1);
  assert.equal(full.granted, false);
  assert.equal(full.reason, 'queue-full');
  assert.ok(
    full.retryAfterMs! > 0 && full.retryAfterMs! <= 400,
    'full.retryAfterMs! > 0 && full.retryAfterMs! <= 400',
  );
  assert.ok((await first).granted, '(await first).granted');
  const none = store.limiter(fixedWindow({ permitLimit: 1, window: 400 }), { name: uniqueName() });
  await none.acquire();
  assert.equal((await none.acquire()).reason, 'limit', 'without a queue the reason is limit');
});

test('an aborted waiter rejects with the signal reason at once, frees its room and is charged nothing', async () => {
  const limiter = store.limiter(fixedWindow({ permitLimit: 1, window: 500, queueLimit: 1 }), {
    name: uniqueName(),
  });
  await limiter.tryAcquire();
  const controller = new AbortController();
  const waiting = limiter.acquire(1, { signal: controller.signal });
  await new Promise((r) => setTimeout(r, 20));
  controller.abort(new Error('gone'));
  await assert.rejects(waiting, /gone/);
  assert.equal((await limiter.statistics()).queued, 0);
  const next = limiter.acquire(1);
  assert.ok((await next).granted, 'the freed room is usable');
  await assert.rejects(limiter.acquire(1, { signal: AbortSignal.abort(new Error('early')) }), /early/);
});

test('oldest-first: a new arrival does not overtake local waiters; newest-first evicts the oldest', async () => {
  const fair = store.limiter(fixedWindow({ permitLimit: 1, window: 300, queueLimit: 5 }), {
    name: uniqueName(),
  });
  await fair.tryAcquire();
  const order: string[] = [];
  const a = fair.acquire().then(() => order.push('a'));
  const b = fair.acquire().then(() => order.push('b'));
  await Promise.all([a, b]);
  assert.deepEqual(order, ['a', 'b']);
  const lifo = store.limiter(
    fixedWindow({ permitLimit: 1, window: 400, queueLimit: 1, queueOrder: 'newest-first' }),
    {
      name: uniqueName(),
    },
  );
  await lifo.tryAcquire();
  const old = lifo.acquire();
  await new Promise((r) => setTimeout(r, 10));
  const young = lifo.acquire();
  const evicted = await old;
  assert.equal(evicted.reason, 'evicted');
  assert.ok((await young).granted, '(await young).granted');
});

test('concurrency: a local release wakes the waiter at once; a remote one is seen by polling', async () => {
  const name = uniqueName();
  const limiter = store.limiter(concurrency({ permitLimit: 1, queueLimit: 2 }), { name });
  const held = await limiter.acquire();
  const waiting = limiter.acquire();
  await new Promise((r) => setTimeout(r, 30));
  const released = performance.now();
  held.release();
  const next = await waiting;
  assert.ok(next.granted, 'next.granted');
  assert.ok(performance.now() - released < 1000, 'performance.now() - released < 1000');
  // Another process (another client and store) holds it now; its release is seen by polling.
  const otherClient = new Redis({ port: server.port });
  const other = redisStore({ client: otherClient, timeoutMs: 2000 }).limiter(
    concurrency({ permitLimit: 1, queueLimit: 1 }),
    {
      name,
    },
  );
  const remote = other.acquire();
  await new Promise((r) => setTimeout(r, 100));
  next.release();
  assert.ok((await remote).granted, '(await remote).granted');
  (await remote).release();
  otherClient.disconnect();
});

test('a concurrency lease whose holder died expires after leaseTtlMs', async () => {
  const name = uniqueName();
  const deadClient = new Redis({ port: server.port });
  // A TTL a busy machine cannot outlast between the two decisions below (the lease must still be held).
  const dying = redisStore({ client: deadClient, leaseTtlMs: 1000, timeoutMs: 2000 });
  const held = await dying.limiter(concurrency({ permitLimit: 1 }), { name }).tryAcquire();
  assert.ok(held.granted, 'held.granted');
  deadClient.disconnect(); // never releases, never renews
  const survivor = store.limiter(concurrency({ permitLimit: 1 }), { name });
  assert.equal((await survivor.tryAcquire()).granted, false);
  await new Promise((r) => setTimeout(r, 1200));
  const lease = await survivor.tryAcquire();
  assert.ok(lease.granted, 'the dead holder’s permit is back');
  lease.release();
});

test('a held lease is renewed while held, so a long holder keeps its permit', async () => {
  const name = uniqueName();
  // Renewed every 200 ms: a busy machine may delay a renewal by up to 400 ms before the lease lapses.
  const short = redisStore({ client, leaseTtlMs: 600, timeoutMs: 2000 });
  const limiter = short.limiter(concurrency({ permitLimit: 1 }), { name });
  const held = await limiter.tryAcquire();
  await new Promise((r) => setTimeout(r, 1900));
  assert.equal((await limiter.tryAcquire()).granted, false, 'still held after 3 TTLs');
  held.release();
  await new Promise((r) => setTimeout(r, 20));
  assert.ok((await limiter.tryAcquire()).granted, '(await limiter.tryAcquire()).granted');
});

test("a concurrency key keeps an expiry at least a lease's: new, with live leases, and after dead ones were removed", async () => {
  const name = uniqueName();
  const key = `floodgate:{${name}}`;
  const limiter = store.limiter(concurrency({ permitLimit: 3 }), { name });
  // Leases written as another holder would have (scored by their expiry on Redis's clock): one long dead.
  await client.zadd(key, 1, '1:dead');
  const first = await limiter.tryAcquire();
  assert.equal(first.remaining, 2, 'the dead lease does not count');
  assert.equal(await client.zscore(key, '1:dead'), null, 'and is removed');
  const made = await client.pttl(key);
  assert.ok(
    made > 25_000,
    `the key, gone with the dead lease and made again, expires with the lease: ${made}`,
  );
  // Another holder's live lease whose key expiry is too short: lengthened; a longer one: kept.
  const [seconds] = await client.time();
  await client.zadd(key, (Number(seconds) + 3600) * 1000, '1:other');
  await client.pexpire(key, 50);
  const second = await limiter.tryAcquire();
  assert.equal(second.remaining, 0, 'two of ours and the other holder');
  assert.ok((await client.pttl(key)) > 25_000, 'lengthened to a lease');
  second.release();
  await client.pexpire(key, 7_200_000);
  const third = await limiter.tryAcquire();
  assert.ok(third.granted, 'third.granted');
  assert.ok((await client.pttl(key)) > 7_000_000, 'a longer expiry is kept');
  first.release();
  third.release();
});

test('a waiter aborted while Redis grants it is charged nothing: the grant is given back', async () => {
  // A client whose third script call is sent with the bucket refilled (the test clock moves when the second
  // answers) and whose answer — a grant — is held until the waiter has been aborted.
  let t = 0;
  let releaseHeld = () => {};
  const held = new Promise<void>((resolve) => {
    releaseHeld = resolve;
  });
  let heldNow = () => {};
  const holding = new Promise<void>((resolve) => {
    heldNow = resolve;
  });
  // Counted by answers (a first evalsha may fail NOSCRIPT and be sent again): the tryAcquire, the waiter's first
  // try (refused: the clock then moves a refill on), the queue's next try (granted, and held).
  let answers = 0;
  const forward = async (call: () => Promise<unknown>) => {
    const answer = await call();
    const n = ++answers;
    if (n === 2) t = 60_000;
    if (n === 3) {
      heldNow();
      await held;
    }
    return answer;
  };
  const slow = {
    evalsha: (...args: Parameters<Redis['evalsha']>) => forward(() => client.evalsha(...args)),
    eval: (...args: Parameters<Redis['eval']>) => forward(() => client.eval(...args)),
  };
  const gated = redisStore({ client: slow as never, timeoutMs: 2000, clock: { now: () => t } });
  const limiter = gated.limiter(
    tokenBucket({ tokenLimit: 100, tokensPerPeriod: 100, period: '1m', queueLimit: 500, unit: 'tokens' }),
    { name: uniqueName() },
  );
  assert.ok((await limiter.tryAcquire(100)).granted);
  const abort = new AbortController();
  const waiting = limiter.acquire(30, { signal: abort.signal });
  await holding;
  abort.abort();
  await assert.rejects(waiting, { name: 'AbortError' });
  releaseHeld();
  for (let i = 0; i < 200 && (await limiter.tryAcquire(0)).remaining !== 100; i++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.equal((await limiter.tryAcquire(0)).remaining, 100, 'the 30 granted after the abort came back');
});
