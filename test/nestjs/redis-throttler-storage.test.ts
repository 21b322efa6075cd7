/**
 * FloodgateRedisThrottlerStorage on a real redis-server, with ioredis and node-redis: it answers every sequence
 * of hits as the memory FloodgateThrottlerStorage does (property, a shared injected clock; the memory one is
 * checked against @nestjs/throttler's own storage in throttler-storage.test.ts), a flood of concurrent hits passes
 * exactly the limit, and the server's own clock is used by default.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ThrottlerStorage } from '@nestjs/throttler';
import fc from 'fast-check';
import {
  FloodgateRedisThrottlerStorage,
  FloodgateThrottlerStorage,
} from '../../src/adapters/nestjs/index.ts';
import { clock } from '../koa/app.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';

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
      const storage = new FloodgateRedisThrottlerStorage({ client: redis.client, prefix: `${name}:flood:` });
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
