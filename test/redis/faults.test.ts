/**
 * Outages under load, with both clients: redis-server killed, restarted, paused with SIGSTOP (slow, not down),
 * and SCRIPT / FUNCTION FLUSH. Every decision returns within its deadline (plus a generous margin for a busy machine), the
 * chosen policy answers while Redis cannot, nothing rejects unhandled, and decisions come from Redis again once
 * it answers, without restarting anything.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { concurrency, fixedWindow, type Lease } from '../../src/index.ts';
import {
  isUnavailableAnswer,
  type RedisLimiter,
  type RedisStore,
  redisStore,
} from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { clients } from './clients.ts';
import { uniqueName } from './twin.ts';

const DEADLINE = 50;
const MARGIN = 700; // a busy 2-core machine; a hang would be seconds
let unhandled = 0;
const onUnhandled = () => unhandled++;
before(() => process.on('unhandledRejection', onUnhandled));
after(() => process.off('unhandledRejection', onUnhandled));

/** Decides in a loop, 8 in flight, recording the slowest decision and every lease. */
function load(limiter: RedisLimiter) {
  const leases: { lease: Lease; started: number }[] = [];
  let slowest = 0;
  let running = true;
  const loop = async () => {
    while (running) {
      const started = performance.now();
      const lease = await limiter.tryAcquire();
      const took = performance.now() - started;
      slowest = Math.max(slowest, took);
      leases.push({ lease, started });
      await new Promise((r) => setTimeout(r, 2));
    }
  };
  const loops = Promise.all(Array.from({ length: 8 }, loop));
  return {
    leases,
    get slowest() {
      return slowest;
    },
    /** Leases of the decisions asked from `t` on. */
    since(t: number) {
      return leases.filter((l) => l.started >= t).map((l) => l.lease);
    },
    async stop() {
      running = false;
      await loops;
    },
  };
}

const fromRedis = (lease: Lease, limiter: RedisLimiter) =>
  lease.source === limiter && lease.reason !== 'unavailable';

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 8000): Promise<void> {
  if (process.env.DEBUG_FAULTS) console.log('waiting for', what, performance.now().toFixed(0));
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const [clientName, connect] of Object.entries(clients)) {
  test(`${clientName}: kill, restart, SIGSTOP and SCRIPT / FUNCTION FLUSH under load`, async () => {
    const server = await RedisServer.start();
    const c = await connect(server.port);
    const insurance = fixedWindow({ permitLimit: 3, window: 60_000 });
    const errors: Error[] = [];
    const onError = (e: Error) => errors.push(e);
    const stores: Record<string, RedisStore> = {
      closed: redisStore({
        client: c.client,
        timeoutMs: DEADLINE,
        retryIntervalMs: 100,
        onUnavailable: 'fail-closed',
        onError,
      }),
      open: redisStore({
        client: c.client,
        timeoutMs: DEADLINE,
        retryIntervalMs: 100,
        onUnavailable: 'fail-open',
        onError,
      }),
      insured: redisStore({
        client: c.client,
        timeoutMs: DEADLINE,
        retryIntervalMs: 100,
        onUnavailable: insurance,
        onError,
      }),
    };
    const limiters = Object.fromEntries(
      Object.entries(stores).map(([k, store]) => [
        k,
        store.limiter(fixedWindow({ permitLimit: 1_000_000, window: 60_000 }), { name: uniqueName() }),
      ]),
    ) as Record<string, RedisLimiter>;
    const loads = Object.fromEntries(Object.entries(limiters).map(([k, l]) => [k, load(l)]));
    const all = () => Object.keys(loads);
    const debug = process.env.DEBUG_FAULTS
      ? setInterval(
          () =>
            console.log(
              Object.entries(loads)
                .map(([k, l]) => `${k}:${l.leases.length}`)
                .join(' '),
            ),
          500,
        )
      : undefined;
    const recovered = (t: number) =>
      all().every((k) => loads[k].since(t).some((lease) => fromRedis(lease, limiters[k])));
    try {
      await until('first decisions', () => recovered(0));

      // Killed: the policy answers.
      await server.kill();
      let t = performance.now() + 30; // decisions asked from here on cannot reach it
      await until('policy answers after kill', () => all().every((k) => loads[k].since(t).length > 20));
      const closed = loads.closed.since(t).slice(5);
      assert.ok(
        closed.every((l) => !l.granted && l.reason === 'unavailable'),
        'fail-closed rejects',
      );
      assert.ok(
        loads.open
          .since(t)
          .slice(5)
          .every((l) => l.granted),
        'fail-open grants',
      );
      const insured = loads.insured.since(t).slice(5);
      assert.ok(
        insured.every((l) => l.source === insurance),
        'the insurance limiter answers',
      );
      assert.ok(insured.filter((l) => l.granted).length <= 3, 'within the insurance limit');

      // Restarted: back to Redis on its own.
      await server.restart();
      t = performance.now();
      await until('recovery after restart', () => recovered(t));

      // Paused: slow, not down — connections stay open, nothing answers.
      server.pause();
      t = performance.now();
      await until('policy answers while paused', () => all().every((k) => loads[k].since(t).length > 20));
      assert.ok(
        loads.closed
          .since(t)
          .slice(5)
          .every((l) => l.reason === 'unavailable'),
        'fail-closed rejects while paused',
      );
      server.resume();
      t = performance.now();
      await until('recovery after SIGCONT', () => recovered(t));

      // Scripts and Functions flushed: reloaded on the spot (FUNCTION LOAD after "Function not found"), not an outage.
      await c.command('SCRIPT', 'FLUSH');
      t = performance.now();
      await until('decisions after SCRIPT FLUSH', () => recovered(t));
      await c.command('FUNCTION', 'FLUSH');
      t = performance.now();
      await until('decisions after FUNCTION FLUSH', () => recovered(t));
      assert.deepEqual(
        errors.filter((e) => /NOSCRIPT|Function not found/.test(e.message)),
        [],
      );
    } finally {
      clearInterval(debug);
      for (const l of Object.values(loads)) await l.stop();
      server.resume();
      await c.close();
      await server.stop();
    }
    for (const [k, l] of Object.entries(loads)) {
      assert.ok(l.slowest < DEADLINE + MARGIN, `${k}: slowest decision ${l.slowest.toFixed(0)} ms`);
    }
    assert.ok(stores.closed.unavailable > 0, 'stores.closed.unavailable > 0');
    assert.equal(unhandled, 0, 'no unhandled rejection');
  });
}

test('store.unavailable counts every onUnavailable answer, those skipped during retryIntervalMs too', async () => {
  const server = await RedisServer.start();
  const c = await clients.ioredis(server.port);
  const store = redisStore({ client: c.client, timeoutMs: DEADLINE, retryIntervalMs: 60_000 });
  const limiter = store.limiter(fixedWindow({ permitLimit: 100, window: 60_000 }), { name: uniqueName() });
  try {
    assert.ok((await limiter.tryAcquire()).granted);
    server.pause();
    // The first misses its deadline; the next ten skip Redis (the retry interval is a minute).
    const first = await limiter.tryAcquire();
    const rest = await Promise.all(Array.from({ length: 10 }, () => limiter.tryAcquire()));
    const answered = [first, ...rest].filter((l) => isUnavailableAnswer(l)).length;
    assert.equal(answered, 11, 'every lease is onUnavailable’s');
    assert.equal(store.unavailable, 11);
  } finally {
    server.resume();
    await c.close();
    await server.stop();
  }
});

test('a concurrency acquisition that missed its deadline but was granted late gives its permit back', async () => {
  const server = await RedisServer.start();
  const c = await clients.ioredis(server.port);
  const store = redisStore({ client: c.client, timeoutMs: DEADLINE, onUnavailable: 'fail-closed' });
  const limiter = store.limiter(concurrency({ permitLimit: 5 }), { name: uniqueName() });
  try {
    const held = [await limiter.tryAcquire(), await limiter.tryAcquire()];
    assert.ok(held.every((l) => l.granted));
    server.pause();
    // Three in one tick (one call, then one of two): each misses its deadline, Redis runs them on SIGCONT.
    const late = await Promise.all([limiter.tryAcquire(), limiter.tryAcquire(), limiter.tryAcquire()]);
    assert.ok(late.every((l) => isUnavailableAnswer(l) && !l.granted));
    server.resume();
    // The late grants are released as their replies come: back to 3 of 5, not 0 for leaseTtlMs (30 s).
    await until('the late grants released', async () => (await limiter.statistics()).available === 3);
    for (const l of held) l.release();
    await until('every permit back', async () => (await limiter.statistics()).available === 5);
  } finally {
    server.resume();
    await c.close();
    await server.stop();
  }
});
