import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clientIp } from '../../src/http/client-ip.ts';
import { fixedWindow } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';
import { type AppSpec, adapters, get, withApp } from './apps.ts';

/**
 * A route's cost on a real redis-server, on every adapter: a per-client requests quota (global) and a tokens
 * budget (policy) in one chain, one round trip; the requests member takes one permit per request, the tokens
 * member the estimate, settled from the handler's report.
 */
let server: RedisServer;
const open: TestClient[] = [];
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await Promise.all(open.map((c) => c.close()));
  await server.stop();
});

let names = 0;
const fresh = (what: string) => `${what}-${++names}-${Date.now()}`;

for (const name of Object.keys(adapters)) {
  describe(`${name}: cost on Redis`, () => {
    test('a requests quota and a tokens budget in one chain: one per request, the estimate, the settle', async () => {
      const c = await clients.ioredis(server.port);
      open.push(c);
      const store = redisStore({ client: c.client, timeoutMs: 2000 });
      const requests = store.partitioned({
        name: fresh('requests'),
        key: clientIp(),
        limiter: fixedWindow({ permitLimit: 3, window: '1h' }),
      });
      const tokens = store.limiter(fixedWindow({ permitLimit: 1000, window: '1h', unit: 'tokens' }), {
        name: fresh('tokens'),
      });
      const spec: AppSpec = {
        options: {
          global: requests,
          policies: {
            chat: {
              limiter: tokens,
              cost: {
                estimate: async (req: unknown) =>
                  Number((req as { headers?: Record<string, string> }).headers?.['x-estimate'] ?? 0) ||
                  Number((req as { req?: { header(n: string): string } }).req?.header('x-estimate')),
              },
            },
          },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        const first = await get(`${base}/chat?settle=100`, { 'x-estimate': '400' });
        assert.equal(first.status, 200);
        assert.match(
          first.headers.get('ratelimit') ?? '',
          /^"global";r=2;t=\d+;pk=:[^:]+:, "tokens";r=600;t=\d+$/,
        );
        const second = await get(`${base}/chat`, { 'x-estimate': '850' });
        assert.equal(second.status, 200, '900 tokens left once the first settled at 100');
        assert.match(second.headers.get('ratelimit') ?? '', /"global";r=1;.*"tokens";r=50;/);
        assert.equal((await get(`${base}/chat`, { 'x-estimate': '60' })).status, 429, 'tokens');
        assert.equal((await get(`${base}/chat`, { 'x-estimate': '50' })).status, 200);
        assert.equal((await get(`${base}/chat`, { 'x-estimate': '1' })).status, 429, 'requests');
        assert.equal((await tokens.tryAcquire(0)).remaining, 0, 'the rejections took nothing');
      });
    });

    test('an estimate above the tokens limit is a 413 (reason too-large); neither member is charged', async () => {
      const c = await clients.ioredis(server.port);
      open.push(c);
      const store = redisStore({ client: c.client, timeoutMs: 2000 });
      const requests = store.limiter(fixedWindow({ permitLimit: 3, window: '1h' }), {
        name: fresh('requests'),
      });
      const tokens = store.limiter(fixedWindow({ permitLimit: 1000, window: '1h', unit: 'tokens' }), {
        name: fresh('tokens'),
      });
      const reasons: unknown[] = [];
      const spec: AppSpec = {
        options: {
          global: requests,
          policies: { chat: { limiter: tokens, cost: { estimate: () => 1001 } } },
          onRejected: (ctx) => {
            reasons.push([ctx.lease.reason, ctx.limiter]);
          },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        const big = await get(`${base}/chat`);
        assert.equal(big.status, 413);
        assert.match(big.body, /exceeds the limit \(1000\) of policy "chat"/);
        assert.deepEqual(reasons, [['too-large', 'endpoint']]);
        assert.equal((await tokens.tryAcquire(0)).remaining, 1000);
        assert.equal((await requests.tryAcquire(0)).remaining, 3);
      });
    });

    test('with overdraw: true on Redis, an estimate above the limit goes through while the budget is whole', async () => {
      const c = await clients.ioredis(server.port);
      open.push(c);
      const store = redisStore({ client: c.client, timeoutMs: 2000 });
      const tokens = store.limiter(
        fixedWindow({ permitLimit: 1000, window: '1h', unit: 'tokens', overdraw: true }),
        { name: fresh('tokens') },
      );
      const spec: AppSpec = {
        options: { policies: { chat: { limiter: tokens, cost: { estimate: () => 1500 } } } },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        assert.equal((await get(`${base}/chat`)).status, 200);
        assert.equal((await get(`${base}/chat`)).status, 429, '500 tokens of debt');
      });
    });
  });
}
