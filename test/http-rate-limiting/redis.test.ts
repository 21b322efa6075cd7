/**
 * Redis limiters as HTTP policies, over real sockets against a real redis-server: two application instances
 * (two `rateLimiting` instances, an ioredis and a node-redis client) share one budget in every adapter; an
 * endpoint rejection burns no global permit in Redis; a paused or killed redis-server gets `onUnavailable`'s
 * answer within the deadline, counted as `store_unavailable`; memory and Redis cannot share a route.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { metrics } from '@opentelemetry/api';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as nodeRateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { headerValue } from '../../src/http/keys.ts';
import type { RejectedContext } from '../../src/http/rate-limiting/options.ts';
import type { HttpRequest, RequestLike } from '../../src/http/request.ts';
import { concurrency, fixedWindow } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { resetTelemetry } from '../../src/telemetry.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';
import { type AppSpec, adapters, get } from './apps.ts';

const clientHeader = headerValue('x-client');
const byClient = (req: RequestLike) => clientHeader(req) ?? 'anon';
const as = (client: string) => ({ 'x-client': client });
const asRequest = (client: string) => ({ header: () => client }) as unknown as HttpRequest;

let server: RedisServer;
const open: TestClient[] = [];
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await Promise.all(open.map((c) => c.close()));
  await server.stop();
});

async function client(kind: 'ioredis' | 'node-redis', port = server.port): Promise<TestClient> {
  const c = await clients[kind](port);
  open.push(c);
  return c;
}

/** One application instance's limiters: a per-client global limit and a `tight` policy, in Redis. */
function limits(
  c: TestClient,
  name: string,
  options: Parameters<typeof redisStore>[0] = { client: c.client },
) {
  const store = redisStore({ timeoutMs: 2000, ...options, client: c.client });
  const global = store.partitioned({
    name: `${name}-global`,
    key: byClient,
    limiter: fixedWindow({ permitLimit: 4, window: '1m' }),
  });
  const tight = store.limiter(fixedWindow({ permitLimit: 1, window: '1m' }), { name: `${name}-tight` });
  return { store, global, tight };
}

const routes: AppSpec['routes'] = [{ path: '/' }, { path: '/tight', limit: 'tight' }];

for (const [adapter, start] of Object.entries(adapters)) {
  describe(`${adapter}: Redis policies`, () => {
    test('two instances share one budget, with the same draft-10 fields as memory', async () => {
      const name = `shared-${adapter}`;
      const a = limits(await client('ioredis'), name);
      const b = limits(await client('node-redis'), name);
      const spec = (l: typeof a): AppSpec => ({
        options: {
          global: l.global,
          policies: { tight: l.tight },
          partitionKeySecret: 'shared-between-instances',
        },
        routes,
      });
      const [one, two] = [await start(spec(a)), await start(spec(b))];
      try {
        const answers = [];
        for (let i = 0; i < 5; i++) answers.push(await get(`${(i % 2 === 0 ? one : two).url}/`, as('c1')));
        assert.deepEqual(
          answers.map((r) => r.status),
          [200, 200, 200, 200, 429],
          'four permits between both instances, not four each',
        );
        const remaining = answers
          .slice(0, 4)
          .map((r) => /"global";r=(\d+);t=\d+;pk=:[^:]+:$/.exec(r.headers.get('ratelimit') ?? '')?.[1]);
        assert.deepEqual(remaining, ['3', '2', '1', '0'], 'both instances report the one shared state');
        assert.match(answers[0].headers.get('ratelimit-policy') ?? '', /^"global";q=4;w=60;pk=:[^:]+:$/);
        assert.equal(
          answers[0].headers.get('ratelimit-policy'),
          answers[1].headers.get('ratelimit-policy'),
          'the same pk from both instances',
        );
        const rejected = answers[4];
        assert.equal(rejected.headers.get('retry-after') !== null, true, 'a time is known: Retry-After');
        assert.match(rejected.headers.get('ratelimit') ?? '', /^"global";r=0;t=\d+;pk=:[^:]+:$/);
      } finally {
        await Promise.all([one.close(), two.close()]);
      }
    });

    test('an endpoint rejection burns no global permit in Redis', async () => {
      const name = `burn-${adapter}`;
      const a = limits(await client('ioredis'), name);
      const b = limits(await client('node-redis'), name);
      const spec = (l: typeof a): AppSpec => ({
        options: { global: l.global, policies: { tight: l.tight } },
        routes,
      });
      const [one, two] = [await start(spec(a)), await start(spec(b))];
      try {
        const first = await get(`${one.url}/tight`, as('c2'));
        assert.equal(first.status, 200);
        assert.match(
          first.headers.get('ratelimit') ?? '',
          /^"global";r=3;t=\d+;pk=:[^:]+:, "tight";r=0;t=\d+$/,
        );
        for (const instance of [two, one, two]) {
          const refused = await get(`${instance.url}/tight`, as('c2'));
          assert.equal(refused.status, 429, 'the tight policy is shared too');
          // A Redis chain's rejection reports the member that said no (the others would cost a round trip).
          assert.match(refused.headers.get('ratelimit') ?? '', /^"tight";r=0;t=\d+$/);
        }
        const stats = await a.global.statistics(asRequest('c2'));
        assert.equal(stats.available, 3, 'three rejected requests took no global permit');
      } finally {
        await Promise.all([one.close(), two.close()]);
      }
    });
  });
}

test('a queued Redis concurrency policy holds its permit until the response ends', async () => {
  const store = redisStore({ client: (await client('ioredis')).client, timeoutMs: 2000 });
  const slots = store.limiter(concurrency({ permitLimit: 1, queueLimit: 1 }), { name: 'http-slots' });
  const app = await adapters.node({
    options: { policies: { slots } },
    routes: [{ path: '/', limit: 'slots' }],
  });
  try {
    const slow = get(`${app.url}/?delay=300`);
    await new Promise((r) => setTimeout(r, 100));
    const [held, queued, full] = await Promise.all([slow, get(`${app.url}/`), get(`${app.url}/`)]);
    assert.deepEqual([held.status, queued.status, full.status].sort(), [200, 200, 429]);
    await new Promise((r) => setTimeout(r, 50)); // the release is sent once the response has ended
    assert.equal((await slots.statistics()).available, 1, 'both permits came back to Redis');
  } finally {
    await app.close();
  }
});

describe('when Redis does not answer', () => {
  const DEADLINE = 150;
  const MARGIN = 2000; // a busy 2-core machine; a hang would be the client's own timeouts, many seconds
  let outage: RedisServer;
  let recorded: Array<Record<string, unknown>>;
  before(async () => {
    outage = await RedisServer.start();
    recorded = [];
    const instrument = (name: string) => ({
      add: (_value: number, attributes: Record<string, unknown>) => {
        if (name === 'floodgate.requests') recorded.push(attributes);
      },
      record: () => {},
    });
    const meter = { createCounter: instrument, createUpDownCounter: instrument, createHistogram: instrument };
    metrics.setGlobalMeterProvider({ getMeter: () => meter } as never);
    resetTelemetry();
  });
  after(async () => {
    metrics.disable();
    resetTelemetry();
    await outage.stop();
  });

  /** An instance on the outage server with `onUnavailable`, through `adapter`; its rejections are recorded. */
  async function instance(
    adapter: string,
    name: string,
    onUnavailable: 'fail-open' | 'fail-closed' | ReturnType<typeof fixedWindow>,
  ) {
    const c = await client('ioredis', outage.port);
    const l = limits(c, name, { client: c.client, timeoutMs: DEADLINE, retryIntervalMs: 100, onUnavailable });
    const seen: RejectedContext[] = [];
    const app = await adapters[adapter]({
      options: { global: l.global, policies: { tight: l.tight }, onRejected: (ctx) => void seen.push(ctx) },
      routes,
    });
    return { app, seen, ...l };
  }

  async function timed(
    url: string,
    client: string,
  ): Promise<Awaited<ReturnType<typeof get>> & { ms: number }> {
    const started = performance.now();
    const answer = await get(url, as(client));
    return { ...answer, ms: performance.now() - started };
  }

  test('paused: fail-closed answers 429 with Retry-After, fail-open 200, both store_unavailable; then recovery', async () => {
    const closed = await instance('node', 'out-closed', 'fail-closed');
    const opened = await instance('fastify', 'out-open', 'fail-open');
    try {
      assert.equal(
        (await get(`${closed.app.url}/tight`, as('p'))).status,
        200,
        'Redis answers before the outage',
      );
      outage.pause();
      recorded.length = 0;
      const refused = await timed(`${closed.app.url}/`, 'p');
      const admitted = await timed(`${opened.app.url}/tight`, 'p');
      outage.resume();
      assert.equal(refused.status, 429);
      assert.ok(refused.ms < DEADLINE + MARGIN, `fail-closed answered after ${refused.ms.toFixed(0)} ms`);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.equal(refused.headers.get('ratelimit'), null, 'no limiter state is known during an outage');
      assert.equal(closed.seen.at(-1)?.limiter, 'store');
      assert.equal(closed.seen.at(-1)?.lease.reason, 'unavailable');
      assert.equal(admitted.status, 200, 'fail-open lets the request through');
      assert.ok(admitted.ms < DEADLINE + MARGIN, `fail-open answered after ${admitted.ms.toFixed(0)} ms`);
      const http = recorded.filter((a) => a.policy === 'global' || a.policy === 'tight');
      assert.deepEqual(
        http.map((a) => `${a.policy}:${a.result}`),
        ['global:store_unavailable', 'tight:store_unavailable'],
      );
      // Back without a restart once the retry interval has passed.
      await new Promise((r) => setTimeout(r, 200));
      let back = 0;
      for (let i = 0; i < 20 && back !== 200; i++) {
        back = (await get(`${closed.app.url}/`, as('q'))).status;
        if (back !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(back, 200, 'decided by Redis again after the outage');
    } finally {
      outage.resume();
      await Promise.all([closed.app.close(), opened.app.close()]);
    }
  });

  test('killed: an insurance limiter decides, through Express', async () => {
    const insured = await instance('express5', 'out-insured', fixedWindow({ permitLimit: 1, window: '1m' }));
    try {
      assert.equal(
        (await get(`${insured.app.url}/`, as('k'))).status,
        200,
        'Redis answers before the outage',
      );
      await outage.kill();
      recorded.length = 0;
      const first = await timed(`${insured.app.url}/`, 'k');
      const second = await timed(`${insured.app.url}/`, 'k');
      assert.deepEqual([first.status, second.status], [200, 429], 'the insurance limiter allows one');
      assert.ok(second.ms < DEADLINE + MARGIN, `answered after ${second.ms.toFixed(0)} ms`);
      assert.equal(insured.seen.at(-1)?.limiter, 'store');
      assert.deepEqual(
        recorded.filter((a) => a.policy === 'global').map((a) => a.result),
        ['store_unavailable', 'store_unavailable'],
      );
    } finally {
      await insured.app.close();
      await outage.restart();
    }
  });
});

describe('memory and Redis in one route', () => {
  test('throw at construction, naming the policies', async () => {
    const store = redisStore({ client: (await client('ioredis')).client });
    const shared = store.limiter(fixedWindow({ permitLimit: 5, window: '1m' }), { name: 'mix' });
    const local = fixedWindow({ permitLimit: 5, window: '1m' });
    assert.throws(
      () => nodeRateLimiting({ global: local, policies: { api: shared } }),
      (error: Error) =>
        error instanceof TypeError &&
        /"global" is in memory and "api" is on a Redis store/.test(error.message),
    );
    const other = redisStore({ client: (await client('node-redis')).client });
    const elsewhere = other.limiter(fixedWindow({ permitLimit: 5, window: '1m' }), { name: 'mix2' });
    assert.throws(
      () => nodeRateLimiting({ global: shared, policies: { api: elsewhere } }),
      /"global" and "api" are on two different Redis stores/,
    );
    assert.throws(
      () => nodeRateLimiting({ global: store.chain(shared, elsewhere) }),
      /"global" and "global.2" are on two different Redis stores/,
    );
  });

  test('throw where an inline policy is declared', async () => {
    const store = redisStore({ client: (await client('ioredis')).client });
    const shared = store.limiter(fixedWindow({ permitLimit: 5, window: '1m' }), { name: 'mix3' });
    const limit = nodeRateLimiting({ global: fixedWindow({ permitLimit: 5, window: '1m' }) });
    assert.throws(
      () => limit((_req, res) => res.end(), { limiter: shared, name: 'export' }),
      /"global" is in memory and "export" is on a Redis store/,
    );
    const express = expressRateLimiting({ global: shared });
    assert.throws(
      () => express.requirePolicy(fixedWindow({ permitLimit: 1, window: '1m' })),
      /requirePolicy.*"global" is on a Redis store and "route" is in memory/,
    );
  });
});
