/**
 * floodgate/koa on a real redis-server (ioredis and node-redis): 429 with body and Retry-After per algorithm,
 * global + named policy where a rejection burns no global permit, per-user keys from ctx.state,
 * skipFailedRequests refunding both chain members, and a Redis concurrency permit held until the response is
 * written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Context } from 'koa';
import { clientIp, rateLimiting } from '../../src/adapters/koa/index.ts';
import { concurrency, fixedWindow, slidingWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';
import { gate, get, start, until, using } from './app.ts';

let server: RedisServer;
const open: TestClient[] = [];
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await Promise.all(open.map((c) => c.close()));
  await server.stop();
});

const byUser = (ctx: Context) => ctx.get('x-user') || 'anon';

for (const kind of ['ioredis', 'node-redis'] as const) {
  describe(`Koa on Redis (${kind})`, () => {
    async function store(name: string) {
      const c = await clients[kind](server.port);
      open.push(c);
      return redisStore({ client: c.client, timeoutMs: 2000, prefix: `koa-${kind}-${name}:` });
    }

    test('429 with a text body and Retry-After per algorithm', async () => {
      const s = await store('algorithms');
      const limiter = rateLimiting({
        policies: {
          fixed: s.limiter(fixedWindow({ permitLimit: 1, window: '1m' }), { name: 'fixed' }),
          sliding: s.limiter(slidingWindow({ permitLimit: 1, window: '1m', segmentsPerWindow: 6 }), {
            name: 'sliding',
          }),
          bucket: s.limiter(tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: '1m' }), {
            name: 'bucket',
          }),
        },
      });
      await using(
        start((app, router) => {
          app.use(limiter);
          for (const name of ['fixed', 'sliding', 'bucket']) {
            router.get(`/${name}`, limiter.requirePolicy(name), (ctx) => {
              ctx.body = 'ok';
            });
          }
        }),
        async ({ url }) => {
          for (const name of ['fixed', 'sliding', 'bucket']) {
            assert.equal((await get(`${url}/${name}`)).status, 200, name);
            const rejected = await get(`${url}/${name}`);
            assert.equal(rejected.status, 429, name);
            const retry = Number(rejected.headers.get('retry-after'));
            assert.ok(retry >= 1 && retry <= 60, `${name}: Retry-After ${retry}`);
            assert.equal(rejected.body, `Too many requests. Try again in ${retry} seconds.`);
          }
        },
      );
    });

    test('global + named policy: a rejection by the policy burns no global permit; per-user keys', async () => {
      const s = await store('chain');
      const global = s.partitioned({
        name: 'global',
        key: byUser,
        limiter: fixedWindow({ permitLimit: 4, window: '1m' }),
      });
      const tight = s.limiter(fixedWindow({ permitLimit: 1, window: '1m' }), { name: 'tight' });
      const limiter = rateLimiting({ global, policies: { tight } });
      await using(
        start((app, router) => {
          app.use(limiter);
          router.get('/', (ctx) => {
            ctx.body = 'ok';
          });
          router.get('/tight', limiter.requirePolicy('tight'), (ctx) => {
            ctx.body = 'ok';
          });
        }),
        async ({ url }) => {
          assert.equal((await get(`${url}/tight`, { 'x-user': 'alice' })).status, 200);
          for (let i = 0; i < 3; i++)
            assert.equal((await get(`${url}/tight`, { 'x-user': 'alice' })).status, 429);
          const asAlice = { get: (name: string) => (name === 'x-user' ? 'alice' : '') } as unknown as Context;
          assert.equal((await global.statistics(asAlice)).available, 3, 'rejections took no global permit');
          const statuses = [];
          for (let i = 0; i < 4; i++) statuses.push((await get(url, { 'x-user': 'alice' })).status);
          assert.deepEqual(statuses, [200, 200, 200, 429]);
          assert.equal((await get(url, { 'x-user': 'bob' })).status, 200, 'bob has his own budget');
        },
      );
    });

    test('skipFailedRequests on Redis: a failed request gives back the permits of both chain members', async () => {
      const s = await store('refunds');
      const global = s.partitioned({
        name: 'global',
        key: byUser,
        limiter: fixedWindow({ permitLimit: 5, window: '1m' }),
      });
      const login = s.partitioned({
        name: 'login',
        key: byUser,
        limiter: fixedWindow({ permitLimit: 2, window: '1m' }),
      });
      const limiter = rateLimiting({
        global,
        policies: { login: { limiter: login, skipFailedRequests: true } },
      });
      const asAlice = { get: (name: string) => (name === 'x-user' ? 'alice' : '') } as unknown as Context;
      // A refund is sent when the response has finished: wait for the store to see it, by its own numbers.
      const settled = async (available: [number, number]) => {
        for (let i = 0; i < 200; i++) {
          const now = [
            (await global.statistics(asAlice)).available,
            (await login.statistics(asAlice)).available,
          ];
          if (now[0] === available[0] && now[1] === available[1]) return;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        assert.fail(`the store never came back to ${available}`);
      };
      await using(
        start((app, router) => {
          app.use(limiter);
          router.get('/login', limiter.requirePolicy('login'), (ctx) => {
            if (ctx.query.fail) ctx.throw(401, 'wrong password');
            ctx.body = 'ok';
          });
        }),
        async ({ url }) => {
          const alice = { 'x-user': 'alice' };
          for (let i = 0; i < 3; i++) {
            assert.equal((await get(`${url}/login?fail=1`, alice)).status, 401);
            await settled([5, 2]);
          }
          assert.equal((await get(`${url}/login`, alice)).status, 200);
          assert.equal((await get(`${url}/login`, alice)).status, 200);
          assert.equal((await get(`${url}/login`, alice)).status, 429);
          await settled([3, 0]);
        },
      );
    });

    test('a Redis concurrency permit is held until the response is written, then comes back', async () => {
      const s = await store('slots');
      const slots = s.partitioned({
        name: 'slots',
        key: clientIp(),
        limiter: concurrency({ permitLimit: 1 }),
      });
      const limiter = rateLimiting({ global: slots });
      const holder = gate();
      let running = 0;
      await using(
        start((app, router) => {
          app.use(limiter);
          router.get('/', async (ctx) => {
            running++;
            if (ctx.query.hold === '1') await holder.promise;
            ctx.body = 'ok';
          });
        }),
        async ({ url }) => {
          const held = get(`${url}/?hold=1`);
          await until(() => running === 1, 'the holder');
          assert.equal((await get(url)).status, 429);
          holder.open();
          assert.equal((await held).status, 200);
          // The release is a round trip of its own after the response: wait for the permit to be back.
          let status = 0;
          for (let i = 0; i < 100 && status !== 200; i++) {
            status = (await get(url)).status;
            if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 10));
          }
          assert.equal(status, 200, 'the permit came back');
        },
      );
    });
  });
}
