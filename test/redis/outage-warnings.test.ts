/**
 * An outage does not pass silently: with no `onError`, a Redis store emits one `FloodgateWarning`
 * (`FLOODGATE_REDIS_UNAVAILABLE`) when Redis stops answering and one (`FLOODGATE_REDIS_RECOVERED`) when it answers
 * again — once per outage, however many decisions `onUnavailable` answers — and none when `onError` is given. Every
 * fallback answer is counted in `floodgate.store.unavailable`. A real redis-server, stopped with SIGSTOP and killed,
 * with both clients.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { metrics } from '@opentelemetry/api';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { fixedWindow, type Lease } from '../../src/index.ts';
import {
  isUnavailableAnswer,
  type RedisClientLike,
  type RedisLimiter,
  redisStore,
} from '../../src/redis/index.ts';
import { resetTelemetry } from '../../src/telemetry.ts';
import { RedisServer } from '../support/redis-server.ts';
import { clients, type TestClient } from './clients.ts';
import { uniqueName } from './twin.ts';

let warnings: { name: string; code: string }[];
const onWarning = (w: Error & { code?: string }) => {
  if (w.code?.startsWith('FLOODGATE_REDIS')) warnings.push({ name: w.name, code: w.code });
};
let unavailableCounted: number;

beforeEach(() => {
  warnings = [];
  process.on('warning', onWarning);
  unavailableCounted = 0;
  const counter = (name: string) => ({
    add: (value: number) => {
      if (name === 'floodgate.store.unavailable') unavailableCounted += value;
    },
    record() {},
  });
  metrics.setGlobalMeterProvider({
    getMeter: () => ({
      createCounter: counter,
      createUpDownCounter: counter,
      createHistogram: counter,
    }),
  } as never);
  resetTelemetry();
});
afterEach(() => {
  process.off('warning', onWarning);
  metrics.disable();
  resetTelemetry();
});

/** Warnings are emitted on the next tick: let them arrive. */
const settle = () => new Promise((r) => setImmediate(r));

/** Asks until Redis itself answers (the store skips it for retryIntervalMs after a failure). */
async function untilRedisAnswers(limiter: RedisLimiter, leases: Lease[]): Promise<void> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const lease = await limiter.tryAcquire();
    leases.push(lease);
    if (!isUnavailableAnswer(lease)) return;
    if (performance.now() > deadline) throw new Error('Redis did not answer again');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A limiter on a store of its own (silent), to load the Function before the one measured. */
const warmUp = (client: RedisClientLike) =>
  redisStore({ client, timeoutMs: 5_000, onError: () => {} }).limiter(
    fixedWindow({ permitLimit: 1, window: '1s' }),
    {
      name: uniqueName(),
    },
  );

for (const [name, connect] of Object.entries(clients)) {
  describe(`outage warnings (${name})`, () => {
    test('one warning per outage and one on recovery, however many decisions; fallbacks counted', async () => {
      const server = await RedisServer.start();
      const c = await connect(server.port);
      // The Function loaded first, by another store: a first call on a busy machine may miss a short deadline.
      await untilRedisAnswers(warmUp(c.client), []);
      const store = redisStore({ client: c.client, timeoutMs: 250, retryIntervalMs: 20 });
      const limiter = store.limiter(fixedWindow({ permitLimit: 1000, window: '1h' }), { name: uniqueName() });
      const leases: Lease[] = [];
      try {
        leases.push(await limiter.tryAcquire());
        await settle();
        assert.deepEqual([...warnings], [], 'nothing while Redis answers');

        // Outage 1: stopped (connections open, nothing answers). Several retry intervals pass.
        server.pause();
        for (let i = 0; i < 30; i++) {
          leases.push(await limiter.tryAcquire());
          await new Promise((r) => setTimeout(r, 5));
        }
        await settle();
        assert.ok(leases.filter(isUnavailableAnswer).length >= 30, 'onUnavailable answered while stopped');
        assert.deepEqual([...warnings], [{ name: 'FloodgateWarning', code: 'FLOODGATE_REDIS_UNAVAILABLE' }]);
        server.resume();
        await untilRedisAnswers(limiter, leases);
        await settle();
        assert.deepEqual(
          warnings.map((w) => w.code),
          ['FLOODGATE_REDIS_UNAVAILABLE', 'FLOODGATE_REDIS_RECOVERED'],
        );
        for (let i = 0; i < 5; i++) leases.push(await limiter.tryAcquire());
        await settle();
        assert.equal(warnings.length, 2, 'no more once it answers');

        // Outage 2: killed and restarted — warned again, once each.
        await server.kill();
        for (let i = 0; i < 20; i++) {
          leases.push(await limiter.tryAcquire());
          await new Promise((r) => setTimeout(r, 5));
        }
        await server.restart();
        await untilRedisAnswers(limiter, leases);
        await settle();
        assert.deepEqual(
          warnings.map((w) => `${w.name}:${w.code}`),
          [
            'FloodgateWarning:FLOODGATE_REDIS_UNAVAILABLE',
            'FloodgateWarning:FLOODGATE_REDIS_RECOVERED',
            'FloodgateWarning:FLOODGATE_REDIS_UNAVAILABLE',
            'FloodgateWarning:FLOODGATE_REDIS_RECOVERED',
          ],
        );

        const fallbacks = leases.filter(isUnavailableAnswer).length;
        assert.equal(
          unavailableCounted,
          fallbacks,
          'every fallback answer is in floodgate.store.unavailable',
        );
        assert.equal(store.unavailable, fallbacks);
      } finally {
        server.resume();
        await c.close();
        await server.stop();
      }
    });

    test('a leased limiter (leases: true) warns once when its takes fail and once when they are answered again', async () => {
      const server = await RedisServer.start();
      const c = await connect(server.port);
      await untilRedisAnswers(warmUp(c.client), []);
      const store = redisStore({ client: c.client, timeoutMs: 250, retryIntervalMs: 20 });
      const limiter = store.limiter(fixedWindow({ permitLimit: 1000, window: '1h' }), {
        name: uniqueName(),
        leases: true,
      });
      const leases: Lease[] = [];
      try {
        leases.push(await limiter.tryAcquire());
        server.pause();
        // Until the batch is spent and a take fails (bounded).
        for (let i = 0; i < 2000 && !leases.some(isUnavailableAnswer); i++) {
          leases.push(await limiter.tryAcquire());
          await new Promise((r) => setTimeout(r, 2));
        }
        await settle();
        assert.deepEqual(
          warnings.map((w) => w.code),
          ['FLOODGATE_REDIS_UNAVAILABLE'],
        );
        server.resume();
        await untilRedisAnswers(limiter, leases);
        await settle();
        assert.deepEqual(
          warnings.map((w) => w.code),
          ['FLOODGATE_REDIS_UNAVAILABLE', 'FLOODGATE_REDIS_RECOVERED'],
        );
      } finally {
        server.resume();
        await c.close();
        await server.stop();
      }
    });

    test('no warning when onError is given: it hears of every failure instead', async () => {
      const server = await RedisServer.start();
      const c = await connect(server.port);
      const errors: Error[] = [];
      const store = redisStore({
        client: c.client,
        timeoutMs: 100,
        retryIntervalMs: 20,
        onError: (e) => errors.push(e),
      });
      const limiter = store.limiter(fixedWindow({ permitLimit: 1000, window: '1h' }), { name: uniqueName() });
      const leases: Lease[] = [];
      try {
        leases.push(await limiter.tryAcquire());
        server.pause();
        for (let i = 0; i < 10; i++) leases.push(await limiter.tryAcquire());
        server.resume();
        await untilRedisAnswers(limiter, leases);
        await settle();
        assert.ok(errors.length >= 1);
        assert.deepEqual([...warnings], []);
      } finally {
        server.resume();
        await c.close();
        await server.stop();
      }
    });
  });
}

/**
 * The production client setup the docs show: with the offline queue on (both clients' default), the decisions
 * onUnavailable answered while disconnected are sent when the client reconnects and charged then, late; with it
 * off they are not.
 */
const production: Record<string, (port: number, offlineQueue: boolean) => Promise<TestClient>> = {
  ioredis: async (port, offlineQueue) => {
    const client = new Redis({ port, enableOfflineQueue: offlineQueue, maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    // Without the queue, a command before 'ready' fails at once: wait, as the docs say.
    await new Promise((resolve) => client.once('ready', resolve));
    return { client, command: (n, ...a) => client.call(n, ...a), close: async () => client.disconnect() };
  },
  'node-redis': async (port, offlineQueue) => {
    const client = createClient({
      socket: { port, reconnectStrategy: (retries) => Math.min(retries * 50, 500) },
      disableOfflineQueue: !offlineQueue,
    });
    client.on('error', () => {});
    await client.connect();
    return {
      client: client as unknown as RedisClientLike,
      command: (...args) => client.sendCommand(args),
      close: async () => {
        client.destroy();
      },
    };
  },
};

for (const [name, connect] of Object.entries(production)) {
  for (const offlineQueue of [true, false]) {
    test(`${name}, offline queue ${offlineQueue ? 'on: decisions of the outage charged late' : 'off: nothing charged late'}`, async () => {
      const server = await RedisServer.start();
      const c = await connect(server.port, offlineQueue);
      const store = redisStore({ client: c.client, timeoutMs: 50, retryIntervalMs: 1, onError: () => {} });
      const limiter = store.limiter(fixedWindow({ permitLimit: 1000, window: '1h' }), { name: uniqueName() });
      try {
        await untilRedisAnswers(limiter, []); // connected, the Function loaded
        await server.kill();
        let answered = 0;
        for (let i = 0; i < 20; i++) {
          if (isUnavailableAnswer(await limiter.tryAcquire())) answered++;
          await new Promise((r) => setTimeout(r, 3));
        }
        assert.equal(answered, 20);
        await server.restart(); // empty: only what is sent from now on is counted
        const leases: Lease[] = [];
        await untilRedisAnswers(limiter, leases);
        await new Promise((r) => setTimeout(r, 200)); // anything still queued arrives
        // Asked after the restart: charged, answered in time or not (a late reply is charged too). The twenty
        // asked during the outage are the rest.
        const charged = 1000 - (await limiter.statistics()).available;
        const asked = leases.length;
        if (offlineQueue)
          assert.ok(charged > asked, `${charged - asked} of the outage's decisions charged late`);
        else assert.ok(charged <= asked, `${charged} charged, ${asked} asked since the restart`);
      } finally {
        await c.close();
        await server.stop();
      }
    });
  }
}
