import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { headerValue } from '../../src/http/keys.ts';
import type { RequestLike } from '../../src/http/request.ts';
import { fixedWindow, type LimiterSpec, slidingWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';
import { type AppSpec, adapters, get } from './apps.ts';

/** Refunds (`Lease.refund`, op `r`) and key functions called once, on a real redis-server. */
let server: RedisServer;
const open: TestClient[] = [];
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await Promise.all(open.map((c) => c.close()));
  await server.stop();
});

async function store(clock?: { now(): number }) {
  const c = await clients.ioredis(server.port);
  open.push(c);
  return redisStore({ client: c.client, timeoutMs: 2000, ...(clock ? { clock } : {}) });
}

let names = 0;
const fresh = (what: string) => `${what}-${++names}-${Date.now()}`;

const algorithms: Array<[string, () => LimiterSpec]> = [
  ['fixed window', () => fixedWindow({ permitLimit: 2, window: '1m' })],
  ['sliding window', () => slidingWindow({ permitLimit: 2, window: '1m', segmentsPerWindow: 6 })],
  ['token bucket', () => tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: '1m' })],
];

describe('Redis refunds', () => {
  for (const [name, spec] of algorithms) {
    test(`${name}: a refund gives the permits back once`, async () => {
      const s = await store({ now: () => 1_000 });
      const limiter = s.limiter(spec(), { name: fresh('refund') });
      const first = await limiter.tryAcquire();
      await limiter.tryAcquire();
      assert.equal((await limiter.tryAcquire()).granted, false);
      first.refund();
      first.refund();
      assert.equal((await limiter.statistics()).available, 1, 'one permit back, not two');
      assert.equal((await limiter.tryAcquire()).granted, true);
      assert.equal((await limiter.tryAcquire()).granted, false);
    });
  }

  for (const [name, make] of [
    ['fixed window', () => fixedWindow({ permitLimit: 2, window: 60_000 })],
    ['sliding window', () => slidingWindow({ permitLimit: 2, window: 60_000, segmentsPerWindow: 6 })],
  ] as const) {
    test(`${name}: a refund after its window ended changes nothing`, async () => {
      let t = 0;
      const s = await store({ now: () => t });
      const limiter = s.limiter(make(), { name: fresh('late') });
      const old = await limiter.tryAcquire();
      t = 60_000; // the grant's window (or segment) has left
      await limiter.tryAcquire();
      await limiter.tryAcquire();
      assert.equal((await limiter.statistics()).available, 0);
      old.refund();
      assert.equal((await limiter.statistics()).available, 0, 'the later window owes the old grant nothing');
    });
  }

  test('a chain refunds every member', async () => {
    const s = await store({ now: () => 0 });
    const perClient = s.partitioned({
      name: fresh('client'),
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: 3, window: '1m' }),
      hashTag: () => 'chain',
    });
    const everyone = s.limiter(fixedWindow({ permitLimit: 5, window: '1m' }), {
      name: fresh('everyone'),
      hashTag: 'chain',
    });
    const both = s.chain(perClient, everyone);
    const lease = await both.tryAcquire('alice');
    lease.refund();
    assert.equal((await perClient.statistics('alice')).available, 3);
    assert.equal((await everyone.statistics()).available, 5);
  });
});

const clientHeader = headerValue('x-client');

for (const [adapter, start] of Object.entries(adapters)) {
  describe(`${adapter}: Redis policies, per request`, () => {
    test('skipSuccessfulRequests refunds on Redis; each key function runs once per request', async () => {
      const s = await store();
      let calls = 0;
      const login = s.partitioned({
        name: fresh(`login-${adapter}`),
        key: (req: RequestLike) => {
          calls++;
          return clientHeader(req) ?? 'anon';
        },
        limiter: fixedWindow({ permitLimit: 2, window: '1m' }),
      });
      const spec: AppSpec = {
        options: { policies: { login: { limiter: login, skipSuccessfulRequests: true } } },
        routes: [{ path: '/login', limit: 'login' }],
      };
      const app = await start(spec);
      try {
        const as = { 'x-client': 'c1' };
        for (let i = 0; i < 4; i++) assert.equal((await get(`${app.url}/login`, as)).status, 200);
        assert.equal((await get(`${app.url}/login?throw=1`, as)).status, 500);
        assert.equal((await get(`${app.url}/login?throw=1`, as)).status, 500);
        // The refunds of the successes are one round trip each: the budget is two failures, whatever the order.
        let status = 0;
        for (let i = 0; i < 40 && status !== 429; i++) status = (await get(`${app.url}/login`, as)).status;
        assert.equal(status, 429);
        assert.equal((await get(`${app.url}/login`, as)).status, 429);
        const requests = calls;
        await get(`${app.url}/login`, as);
        assert.equal(calls - requests, 1, 'a rejected request asks its key once');
      } finally {
        await app.close();
      }
    });

    test('a chain of global and policy on Redis: a refund gives back both; key functions once per request', async () => {
      const s = await store();
      const calls = { global: 0, login: 0 };
      const counted = (which: 'global' | 'login') => (req: RequestLike) => {
        calls[which]++;
        return clientHeader(req) ?? 'anon';
      };
      const name = fresh(`chain-${adapter}`);
      const global = s.partitioned({
        name: `${name}-global`,
        key: counted('global'),
        limiter: fixedWindow({ permitLimit: 10, window: '1m' }),
      });
      const login = s.partitioned({
        name: `${name}-login`,
        key: counted('login'),
        limiter: fixedWindow({ permitLimit: 2, window: '1m' }),
      });
      const spec: AppSpec = {
        options: { global, policies: { login: { limiter: login, skipFailedRequests: true } } },
        routes: [{ path: '/login', limit: 'login' }],
      };
      const app = await start(spec);
      try {
        const as = { 'x-client': 'c2' };
        const perRequest: string[] = [];
        for (const path of [
          '/login?throw=1',
          '/login?throw=1',
          '/login?throw=1',
          '/login',
          '/login',
          '/login',
        ]) {
          const before = { ...calls };
          const response = await get(`${app.url}${path}`, as);
          perRequest.push(
            `${response.status} +${calls.global - before.global}/+${calls.login - before.login}`,
          );
        }
        // Three failures refunded (both members), then two admitted, then the policy says no.
        assert.deepEqual(perRequest, [
          '500 +1/+1',
          '500 +1/+1',
          '500 +1/+1',
          '200 +1/+1',
          '200 +1/+1',
          '429 +1/+1',
        ]);
        const left = await global.statistics({ headers: as, socket: {} } as never);
        assert.equal(left.available, 8, 'the global member got its three permits back too');
      } finally {
        await app.close();
      }
    });
  });
}
