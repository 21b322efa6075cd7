/**
 * FloodgateRedisThrottlerStorage on a real redis-server, with ioredis and node-redis: it answers every sequence
 * of hits as the memory FloodgateThrottlerStorage does (property, a shared injected clock; the memory one is
 * checked against @nestjs/throttler's own storage in throttler-storage.test.ts), a flood of concurrent hits passes
 * exactly the limit, and the server's own clock is used by default.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { APP_GUARD } from '@nestjs/core';
import { ThrottlerGuard, ThrottlerModule, type ThrottlerStorage } from '@nestjs/throttler';
import { metrics } from '@opentelemetry/api';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import {
  FloodgateRedisThrottlerStorage,
  FloodgateThrottlerStorage,
} from '../../src/adapters/nestjs/index.ts';
import { resetTelemetry } from '../../src/telemetry.ts';
import { clock, get } from '../koa/app.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';
import { controller, start, using } from './app.ts';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await server.stop();
});

for (const [name, connect] of Object.entries(clients)) {
  describe(`FloodgateRedisThrottlerStorage (${name})`, () => {
    let redis: TestClient;
    before(async () => {
      redis = await connect(server.port);
    });
    after(async () => {
      await redis.close();
    });

    test('is a ThrottlerStorage that answers as the memory storage does', async () => {
      const typed: ThrottlerStorage = new FloodgateRedisThrottlerStorage({ client: redis.client });
      void typed;
      const blocks = fc.record({
        a: fc.constantFrom(0, 1000, 3000, 7000),
        b: fc.constantFrom(0, 1000, 3000, 7000),
      });
      const op = fc.record({
        advance: fc.integer({ min: 0, max: 2500 }),
        key: fc.constantFrom('a', 'b'),
        limit: fc.integer({ min: 1, max: 4 }),
      });
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(op, { maxLength: 40 }), blocks, async (ops, block) => {
          const c = clock(1_700_000_000_000);
          const memory = new FloodgateThrottlerStorage({ clock: c });
          const shared = new FloodgateRedisThrottlerStorage({
            client: redis.client,
            prefix: `${name}:t${++run}:`,
            clock: c,
            timeoutMs: '10s', // answers, not outages: a loaded machine must not turn them into fallbacks
          });
          for (const o of ops) {
            c.t += o.advance;
            const blockDuration = block[o.key as 'a' | 'b'];
            // One ttl per key, as a throttler has: Redis keeps hits in arrival order.
            const want = await memory.increment(o.key, 1500, o.limit, blockDuration, 'default');
            const got = await shared.increment(o.key, 1500, o.limit, blockDuration, 'default');
            assert.deepEqual(got, want);
          }
        }),
        { numRuns: 60 },
      );
    });

    test('a flood of concurrent hits passes exactly the limit (one atomic script per hit)', async () => {
      const storage = new FloodgateRedisThrottlerStorage({
        client: redis.client,
        prefix: `${name}:flood:`,
        timeoutMs: '10s', // 200 hits in one go on a loaded machine: the claim is atomicity, not speed
      });
      const answers = await Promise.all(
        Array.from({ length: 200 }, () => storage.increment('ip', 60_000, 5, 60_000, 'default')),
      );
      assert.equal(answers.filter((a) => !a.isBlocked).length, 5);
      const blocked = answers.find((a) => a.isBlocked)!;
      assert.equal(blocked.timeToBlockExpire, 60); // the server's clock: a block of 60 s just began
    });

    test('bad options: a TypeError naming the option', () => {
      assert.throws(() => new FloodgateRedisThrottlerStorage({ client: {} as never }), /client/);
      assert.throws(
        () => new FloodgateRedisThrottlerStorage({ client: redis.client, prefx: 'x' } as never),
        /did you mean "prefix"/,
      );
    });
  });
}

/**
 * Redis down under a Nest app, over real sockets, with clients as an application creates them by default (ioredis
 * `new Redis()`: offline queue on, 20 retries per command; node-redis reconnecting): before the deadline existed a
 * request hung for a minute, then a 500 (ioredis' MaxRetriesPerRequestError). Now each answer comes within
 * `timeoutMs` (plus the machine's slack) and follows `onUnavailable`: stopped with SIGSTOP, then killed.
 */
const defaultClients: Record<string, (port: number) => Promise<{ client: never; close(): Promise<void> }>> = {
  ioredis: async (port) => {
    const client = new Redis({ port });
    client.on('error', () => {});
    return { client: client as never, close: async () => client.disconnect() };
  },
  'node-redis': async (port) => {
    const client = createClient({ socket: { port } });
    client.on('error', () => {});
    await client.connect();
    return {
      client: client as never,
      close: async () => {
        client.destroy();
      },
    };
  },
};

const TIMEOUT = 250;
const SLACK = 9_000; // a 2-core machine at load 30+ stalled one answer 4 s (3 s failed); a hang is a minute

for (const [name, connect] of Object.entries(defaultClients)) {
  for (const policy of ['fail-open', 'fail-closed', 'insurance'] as const) {
    test(`Redis stopped, then killed, under a Nest app (${name}, ${policy}): answered within the bound by the policy`, async () => {
      const server = await RedisServer.start();
      const redis = await connect(server.port);
      // The Function loaded first, by a patient storage: a busy machine's first call is no outage.
      await new FloodgateRedisThrottlerStorage({ client: redis.client, timeoutMs: '10s' }).increment(
        'warm',
        1000,
        1,
        0,
        'warm',
      );
      const errors: Error[] = [];
      const storage = new FloodgateRedisThrottlerStorage({
        client: redis.client,
        timeoutMs: TIMEOUT,
        retryIntervalMs: 50,
        onError: (e) => errors.push(e),
        onUnavailable: policy === 'insurance' ? new FloodgateThrottlerStorage() : policy,
      });
      const timed = async (url: string) => {
        const t = performance.now();
        const response = await get(url);
        return {
          status: response.status,
          ms: performance.now() - t,
          retryAfter: response.headers.get('retry-after'),
          remaining: response.headers.get('x-ratelimit-remaining'),
        };
      };
      try {
        await using(
          start('express', {
            imports: [ThrottlerModule.forRoot({ throttlers: [{ ttl: 60_000, limit: 2 }], storage })],
            controllers: [controller({ '/a': [() => 'ok'] })],
            providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
          }),
          async ({ url }) => {
            assert.equal((await timed(`${url}/a`)).status, 200, 'Redis answers');
            // The memory insurance counts from its own zero: 2 let through, then refused, through both outages.
            const insured = [
              [200, 200, 429, 429],
              [429, 429, 429, 429],
            ];
            const stops = [() => server.pause(), () => server.kill()];
            for (const [round, stop] of stops.entries()) {
              await stop();
              const answers = [];
              for (let i = 0; i < 4; i++) answers.push(await timed(`${url}/a`));
              for (const a of answers) assert.ok(a.ms < TIMEOUT + SLACK, `answered in ${a.ms.toFixed(0)} ms`);
              const statuses = answers.map((a) => a.status);
              if (policy === 'fail-open') {
                assert.deepEqual(statuses, [200, 200, 200, 200]);
                assert.equal(answers[0].remaining, '1', 'counted as a first hit: limit - 1');
              } else if (policy === 'insurance') assert.deepEqual(statuses, insured[round]);
              else {
                assert.deepEqual(statuses, [429, 429, 429, 429]);
                assert.equal(answers[0].retryAfter, '1'); // retryIntervalMs, in whole seconds
              }
              server.resume();
              // Past retryIntervalMs: the next round's hits go to Redis again rather than skip it.
              await new Promise((r) => setTimeout(r, 80));
            }
            assert.ok(errors.length >= 2, 'onError heard of the outages');
          },
        );
      } finally {
        server.resume();
        await redis.close();
        await server.stop();
      }
    });
  }
}

test('without onError, one FloodgateWarning per outage and one on recovery; fallback hits counted', async () => {
  const server = await RedisServer.start();
  const redis = await defaultClients.ioredis(server.port);
  const codes: string[] = [];
  const onWarning = (w: Error & { code?: string }) => {
    if (w.code?.startsWith('FLOODGATE_REDIS')) codes.push(`${w.name}:${w.code}`);
  };
  process.on('warning', onWarning);
  let counted = 0;
  const instrument = (name: string) => ({
    add: (value: number, attributes: { limiter?: string }) => {
      if (name === 'floodgate.store.unavailable' && attributes.limiter === 'default') counted += value;
    },
    record() {},
  });
  metrics.setGlobalMeterProvider({
    getMeter: () => ({
      createCounter: instrument,
      createUpDownCounter: instrument,
      createHistogram: instrument,
    }),
  } as never);
  resetTelemetry();
  const storage = new FloodgateRedisThrottlerStorage({
    client: redis.client,
    timeoutMs: TIMEOUT,
    retryIntervalMs: 20,
  });
  const hit = () => storage.increment('ip', 60_000, 1000, 0, 'default');
  const settle = () => new Promise((r) => setImmediate(r));
  try {
    // Until Redis answers (a busy machine's first call, the Function loading, may miss the deadline): then count.
    while ((await hit()).totalHits < 2) await new Promise((r) => setTimeout(r, 10));
    await settle();
    codes.length = 0;
    counted = 0;
    server.pause();
    for (let i = 0; i < 10; i++) {
      await hit();
      await new Promise((r) => setTimeout(r, 10));
    }
    await settle();
    assert.deepEqual(codes, ['FloodgateWarning:FLOODGATE_REDIS_UNAVAILABLE']);
    assert.equal(
      counted,
      10,
      'each hit onUnavailable answered, in floodgate.store.unavailable{limiter: throttler}',
    );
    server.resume();
    // Until Redis counts again (its totals grow past the fail-open answer's 1).
    const deadline = performance.now() + 10_000;
    while ((await hit()).totalHits <= 1 && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    for (let i = 0; i < 3; i++) await hit();
    await settle();
    assert.deepEqual(codes, [
      'FloodgateWarning:FLOODGATE_REDIS_UNAVAILABLE',
      'FloodgateWarning:FLOODGATE_REDIS_RECOVERED',
    ]);
  } finally {
    metrics.disable();
    resetTelemetry();
    process.off('warning', onWarning);
    server.resume();
    await redis.close();
    await server.stop();
  }
});

test('bad outage options: a TypeError naming the option', () => {
  const client = new Redis({ lazyConnect: true });
  assert.throws(() => new FloodgateRedisThrottlerStorage({ client, timeoutMs: 0 }), /timeoutMs/);
  assert.throws(() => new FloodgateRedisThrottlerStorage({ client, retryIntervalMs: -1 }), /retryIntervalMs/);
  assert.throws(
    () => new FloodgateRedisThrottlerStorage({ client, onUnavailable: 'open' as never }),
    /onUnavailable/,
  );
  assert.throws(() => new FloodgateRedisThrottlerStorage({ client, onError: 1 as never }), /onError/);
  client.disconnect();
});
