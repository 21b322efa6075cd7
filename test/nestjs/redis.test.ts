/**
 * floodgate/nestjs on a real redis-server: the module's options from forRootAsync with the app's own Redis
 * client injected; global + @RateLimit policy on Redis where a rejection burns no global permit; 429 with
 * Retry-After.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ExecutionContext } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { FloodgateGuard, FloodgateModule, RateLimit } from '../../src/adapters/nestjs/index.ts';
import { fixedWindow } from '../../src/index.ts';
import { type RedisClientLike, redisStore } from '../../src/redis/index.ts';
import { get } from '../koa/app.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';
import { controller, start, using } from './app.ts';

let server: RedisServer;
let redis: TestClient;
before(async () => {
  server = await RedisServer.start();
  redis = await clients.ioredis(server.port);
});
after(async () => {
  await redis.close();
  await server.stop();
});

const byUser = (context: ExecutionContext) =>
  context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-user'] ??
  'anon';

test('Nest on Redis: an injected client, global + policy as one chain, a rejection burns no global permit', async () => {
  const REDIS = Symbol('redis');
  class RedisModule {}
  const redisModule = {
    module: RedisModule,
    providers: [{ provide: REDIS, useValue: redis.client }],
    exports: [REDIS],
  };
  const Api = controller({ '/': [() => 'ok'], '/tight': [() => 'ok', RateLimit('tight')] });
  await using(
    start('express', {
      imports: [
        FloodgateModule.forRootAsync({
          imports: [redisModule],
          inject: [REDIS],
          useFactory: (client: RedisClientLike) => {
            const store = redisStore({ client, timeoutMs: 2000, prefix: 'nest:' });
            const global = store.partitioned({
              name: 'global',
              key: byUser,
              limiter: fixedWindow({ permitLimit: 4, window: '1m' }),
            });
            const tight = store.limiter(fixedWindow({ permitLimit: 1, window: '1m' }), { name: 'tight' });
            return { global, policies: { tight } };
          },
        }),
      ],
      controllers: [Api],
      providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
    }),
    async ({ url }) => {
      assert.equal((await get(`${url}/tight`, { 'x-user': 'alice' })).status, 200);
      for (let i = 0; i < 3; i++) {
        const rejected = await get(`${url}/tight`, { 'x-user': 'alice' });
        assert.equal(rejected.status, 429);
        const retry = Number(rejected.headers.get('retry-after'));
        assert.ok(retry >= 1 && retry <= 60);
      }
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await get(url, { 'x-user': 'alice' })).status);
      assert.deepEqual(statuses, [200, 200, 200, 429], 'the three rejections took no global permit');
      assert.equal((await get(url, { 'x-user': 'bob' })).status, 200);
    },
  );
});
