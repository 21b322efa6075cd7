/**
 * The short form, `rateLimiting({ limit, window })`: one fixed window per client address on every adapter over
 * real sockets (127.0.0.1 and 127.0.0.2 are two clients of a server on 127.0.0.1), `key` overriding who a client
 * is, route policies chained with it, the framework's trust setting honoured; and the warning once at startup
 * when the global limiter is one budget for the whole server.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { APP_GUARD } from '@nestjs/core';
import express from 'express';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/rate-limiting.ts';
import { FloodgateGuard, FloodgateModule } from '../../src/adapters/nestjs/index.ts';
import { resetClientIpWarnings } from '../../src/http/client-ip.ts';
import { RateLimiting } from '../../src/http/rate-limiting/engine.ts';
import { resetWarnings } from '../../src/http/warnings.ts';
import { chain, concurrency, fixedWindow, partitioned, slidingWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { start as startKoa, using as usingKoa } from '../koa/app.ts';
import { controller, platforms, start as startNest, using as usingNest } from '../nestjs/app.ts';
import { adapters, getFrom, listen, withApp } from './apps.ts';

const A = '127.0.0.1';
const B = '127.0.0.2';

/** Statuses of GET `url` from each local address in turn. */
async function statuses(url: string, from: string[], headers: Record<string, string>[] = []) {
  const seen: number[] = [];
  for (let i = 0; i < from.length; i++) seen.push((await getFrom(url, from[i], headers[i] ?? {})).status);
  return seen;
}

// A, A again (over the limit of 1), B (a client of its own), B again.
const perClient = [A, A, B, B];
const expected = [200, 429, 200, 429];

describe('rateLimiting({ limit, window }): one budget per client address', () => {
  for (const name of Object.keys(adapters)) {
    test(`${name}`, async () => {
      await withApp(name, { options: { limit: 1, window: '1m' }, routes: [{ path: '/' }] }, async (url) => {
        assert.deepEqual(await statuses(`${url}/`, perClient), expected);
        const fields = await getFrom(`${url}/`, A);
        assert.match(String(fields.headers['ratelimit-policy']), /"global";q=1;w=60;pk=/);
      });
    });
  }

  test('koa', async () => {
    await usingKoa(
      startKoa((app) => {
        app.use(koaRateLimiting({ limit: 1, window: '1m' }));
        app.use((ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        assert.deepEqual(await statuses(`${url}/`, perClient), expected);
      },
    );
  });

  for (const platform of platforms) {
    test(`nestjs (${platform})`, async () => {
      await usingNest(
        startNest(platform, {
          imports: [FloodgateModule.forRoot({ limit: 1, window: '1m' })],
          controllers: [controller({ '/': [() => 'ok'] })],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        async ({ url }) => {
          assert.deepEqual(await statuses(`${url}/`, perClient), expected);
        },
      );
    });
  }

  for (const name of Object.keys(adapters)) {
    test(`${name}: key overrides who a client is; route policies chain with it`, async () => {
      const key = (req: unknown) => {
        const r = req as { headers?: Record<string, unknown>; req?: { header(n: string): string } };
        const user =
          r.req !== undefined && r.headers === undefined ? r.req.header('x-user') : r.headers?.['x-user'];
        return `user:${String(user)}`;
      };
      const strict = partitioned({ key, limiter: fixedWindow({ permitLimit: 1, window: '1m' }) });
      await withApp(
        name,
        {
          options: { limit: 2, window: '1m', key, policies: { strict } },
          routes: [{ path: '/' }, { path: '/strict', limit: 'strict' }],
        },
        async (url) => {
          // One address, two users: each has its own budget of 2.
          const users = [{ 'x-user': 'ann' }, { 'x-user': 'ann' }, { 'x-user': 'ann' }, { 'x-user': 'bob' }];
          assert.deepEqual(await statuses(`${url}/`, [A, A, A, A], users), [200, 200, 429, 200]);
          // The policy's budget of 1 and the global one (bob has 1 left), all-or-nothing.
          const bob = [{ 'x-user': 'bob' }, { 'x-user': 'bob' }];
          assert.deepEqual(await statuses(`${url}/strict`, [A, A], bob), [200, 429]);
        },
      );
    });
  }
});

describe("the short form's client address follows the framework's trust setting", () => {
  const forwarded = [{ 'x-forwarded-for': '203.0.113.1' }, { 'x-forwarded-for': '203.0.113.1' }];
  const other = { 'x-forwarded-for': '203.0.113.2' };

  test("Express app.set('trust proxy', 'loopback')", async () => {
    const app = express();
    app.set('trust proxy', 'loopback');
    app.use(expressRateLimiting({ limit: 1, window: '1m' }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const server = await listen(http.createServer(app));
    try {
      assert.deepEqual(await statuses(`${server.url}/`, [A, A, A], [...forwarded, other]), [200, 429, 200]);
    } finally {
      await server.close();
    }
  });

  test("Fastify trustProxy: '127.0.0.1'", async () => {
    const app = Fastify({ trustProxy: '127.0.0.1' });
    await app.register(fastifyRateLimiting, { limit: 1, window: '1m' });
    app.get('/', async () => 'ok');
    await app.ready();
    const server = await listen(app.server);
    try {
      assert.deepEqual(await statuses(`${server.url}/`, [A, A, A], [...forwarded, other]), [200, 429, 200]);
    } finally {
      await server.close();
    }
  });

  test('Koa app.proxy with app.maxIpsCount 1', async () => {
    await usingKoa(
      startKoa((app) => {
        app.proxy = true;
        app.maxIpsCount = 1;
        app.use(koaRateLimiting({ limit: 1, window: '1m' }));
        app.use((ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        assert.deepEqual(await statuses(`${url}/`, [A, A, A], [...forwarded, other]), [200, 429, 200]);
      },
    );
  });
});

describe('rateLimiting({ limit, window }): refused when incomplete or mixed', () => {
  const refused: Array<[string, object, RegExp]> = [
    ['limit alone', { limit: 5 }, /rateLimiting: limit and window go together .* got limit alone/],
    ['window alone', { window: '1m' }, /got window alone/],
    ['limit 0', { limit: 0, window: '1m' }, /rateLimiting: limit must be a positive integer; got 0/],
    ['limit 1.5', { limit: 1.5, window: '1m' }, /rateLimiting: limit must be a positive integer/],
    ['a bad window', { limit: 5, window: '1 minute' }, /rateLimiting: window/],
    ['with global', { limit: 5, window: '1m', global: concurrency({ permitLimit: 1 }) }, /not both/],
    ['key without limit', { key: () => 'k' }, /rateLimiting: key goes with limit and window/],
    ['key not a function', { limit: 5, window: '1m', key: 'ip' }, /rateLimiting: key must be a function/],
    ['shared with limit', { limit: 5, window: '1m', shared: true }, /limit is per client/],
    ['shared not a boolean', { shared: 'yes' }, /rateLimiting: shared must be a boolean; got "yes"/],
  ];
  for (const [what, options, message] of refused) {
    test(what, () => {
      assert.throws(() => new RateLimiting(options as never), message);
    });
  }
});

describe('a warning when the global limiter is one budget for the whole server', () => {
  const warnings: Array<{ code?: string; message: string; name: string }> = [];
  const onWarning = (warning: Error & { code?: string }) => {
    if (warning.code?.startsWith('FLOODGATE_')) {
      warnings.push({ code: warning.code, message: warning.message, name: warning.name });
    }
  };
  beforeEach(() => {
    resetWarnings();
    resetClientIpWarnings();
    warnings.length = 0;
    process.on('warning', onWarning);
  });
  afterEach(() => {
    process.off('warning', onWarning);
  });
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  const window = fixedWindow({ permitLimit: 100, window: '1m' });

  test('once, at startup, with the fix in the message', async () => {
    new RateLimiting({ global: window });
    new RateLimiting({ global: slidingWindow({ permitLimit: 100, window: '1m', segmentsPerWindow: 4 }) });
    await settle();
    assert.deepEqual(
      warnings.map((w) => [w.name, w.code]),
      [['FloodgateWarning', 'FLOODGATE_GLOBAL_NOT_PARTITIONED']],
    );
    assert.match(warnings[0].message, /one budget for the whole server/);
    assert.match(warnings[0].message, /rateLimiting\(\{ limit: 100, window: '1m' \}\)/);
    assert.match(warnings[0].message, /shared: true/);
  });

  test('for a chain of unpartitioned limiters, and a Redis store limiter (nothing is sent to Redis)', async () => {
    new RateLimiting({
      global: chain(window, tokenBucket({ tokenLimit: 5, tokensPerPeriod: 1, period: '1s' })),
    });
    await settle();
    assert.equal(warnings.length, 1);
    resetWarnings();
    // A real client that never connects: making the limiter sends nothing.
    const client = new Redis({ lazyConnect: true });
    const store = redisStore({ client });
    new RateLimiting({ global: store.limiter(window, { name: 'all' }) });
    await settle();
    assert.equal(warnings.length, 2);
    client.disconnect();
  });

  test('not with shared: true, nor validate: false', async () => {
    new RateLimiting({ global: window, shared: true });
    await settle();
    assert.deepEqual(warnings, []);
    new RateLimiting({ global: window, validate: false });
    new RateLimiting({ global: window });
    await settle();
    assert.deepEqual(warnings, []);
  });

  test('not for a partitioned limiter, a chain with one, a concurrency limit, the short form, policies', async () => {
    const ip = partitioned({ key: () => 'k', limiter: window });
    new RateLimiting({ global: ip });
    new RateLimiting({ global: chain(ip, window) });
    new RateLimiting({ global: concurrency({ permitLimit: 10 }) });
    new RateLimiting({ limit: 100, window: '1m' });
    // A policy is one budget for its routes, by design: its docs say so; only `global` warns.
    new RateLimiting({ global: ip, policies: { all: window } });
    await settle();
    assert.deepEqual(warnings, []);
  });
});
