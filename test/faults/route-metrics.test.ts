/**
 * `http.route` on the rate-limiting instruments, over real sockets: where the adapter knows the route's template
 * (Fastify's route url, Hono's matched route, Express's route looked up ahead, Koa when a marker decides), every instrument of a
 * request carries it; a request whose route is not known carries none. The meter is an in-memory one.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, test } from 'node:test';
import { serve } from '@hono/node-server';
import Router from '@koa/router';
import { metrics } from '@opentelemetry/api';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as honoRateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/rate-limiting.ts';
import { RateLimiting } from '../../src/http/rate-limiting/engine.ts';
import { MAX_TEMPLATES } from '../../src/http/rate-limiting/route.ts';
import { concurrency } from '../../src/index.ts';
import { resetTelemetry } from '../../src/telemetry.ts';
import { listen, type Running } from '../http-rate-limiting/apps.ts';

const express4 = createRequire(import.meta.url)('express4') as typeof express;

type Recorded = { name: string; value: number; attributes: Record<string, unknown> };
let recorded: Recorded[];

beforeEach(() => {
  recorded = [];
  const make = (name: string) => {
    const write = (value: number, attributes: Record<string, unknown>) =>
      recorded.push({ name, value, attributes });
    return { add: write, record: write };
  };
  const meter = { createCounter: make, createUpDownCounter: make, createHistogram: make };
  metrics.setGlobalMeterProvider({ getMeter: () => meter } as never);
  resetTelemetry();
});

afterEach(() => {
  metrics.disable();
  resetTelemetry();
});

// `/users/:id` holds one permit of policy `q` (a queue of one) until `open()`; `/plain/:x` has the global limiter
// only (a concurrency limiter that never queues, so it is held too).
const options = () => ({
  global: concurrency({ permitLimit: 100 }),
  policies: { q: concurrency({ permitLimit: 1, queueLimit: 1 }) },
});

let gate: { promise: Promise<void>; open: () => void };
function closeGate(): void {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  gate = { promise, open };
}

// @hono/node-server listens by itself.
async function honoServer(app: Hono): Promise<Running> {
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as http.Server;
  if (!server.listening) await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

const waitFor = async (what: string, found: () => boolean): Promise<void> => {
  for (let i = 0; i < 10_000 && !found(); i++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(found(), what);
};

const of = (name: string) => recorded.filter((r) => r.name === `floodgate.${name}`).map((r) => r.attributes);

/**
 * Two requests to `/users/:id` (the second queued behind the first, then admitted), one to `/plain/:x`: every
 * rate-limiting instrument carries the route's template.
 */
async function queuedAndHeld(running: Running, plainRoute: string | undefined): Promise<void> {
  try {
    closeGate();
    const first = fetch(`${running.url}/users/1`);
    await waitFor('the first request holds the permit', () => of('active_leases').length > 0);
    const second = fetch(`${running.url}/users/2`);
    await waitFor('the second request is queued', () => of('queued_requests').length > 0);
    gate.open();
    assert.equal((await first).status, 200);
    assert.equal((await second).status, 200);
    const plain = await fetch(`${running.url}/plain/7`);
    assert.equal(plain.status, 200);
    await plain.text();
    await waitFor('every lease is back', () => of('lease_duration').length === 3);
  } finally {
    await running.close();
  }
  const users = { policy: 'q', 'http.route': '/users/:id' };
  // Every decision of a route that can queue goes through the queue (+1, then -1), the first one too.
  assert.deepEqual(of('queued_requests'), [users, users, users, users]);
  assert.deepEqual(of('time_in_queue'), [
    { ...users, result: 'acquired' },
    { ...users, result: 'acquired' },
  ]);
  const plain =
    plainRoute === undefined ? { policy: 'global' } : { policy: 'global', 'http.route': plainRoute };
  assert.deepEqual(of('requests'), [
    { ...users, result: 'acquired' },
    { ...users, result: 'acquired' },
    { ...plain, result: 'acquired' },
  ]);
  assert.deepEqual(of('active_leases'), [users, users, users, users, plain, plain]);
  assert.deepEqual(of('lease_duration'), [users, users, plain]);
}

test('Fastify: every instrument carries the route url, on marked and unmarked routes', async () => {
  const app = Fastify();
  await app.register(fastifyRateLimiting, options());
  app.get('/users/:id', { config: { rateLimiting: 'q' } }, async () => {
    await gate.promise;
    return 'ok';
  });
  app.get('/plain/:x', async () => 'ok');
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  await queuedAndHeld({ url: `http://127.0.0.1:${port}`, close: () => app.close() }, '/plain/:x');
});

test('Fastify: a route under a prefix carries its full url; a request no route matched carries none', async () => {
  const app = Fastify();
  await app.register(fastifyRateLimiting, { global: concurrency({ permitLimit: 10 }) });
  await app.register(
    async (api) => {
      api.get('/items/:id', async () => 'ok');
    },
    { prefix: '/api' },
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  try {
    assert.equal((await fetch(`http://127.0.0.1:${port}/api/items/3`)).status, 200);
    assert.equal((await fetch(`http://127.0.0.1:${port}/nowhere`)).status, 404);
  } finally {
    await app.close();
  }
  assert.deepEqual(of('requests'), [
    { policy: 'global', result: 'acquired', 'http.route': '/api/items/:id' },
    { policy: 'global', result: 'acquired' },
  ]);
});

test('Hono: every instrument carries the matched route, on marked and unmarked routes', async () => {
  const app = new Hono();
  const limiter = honoRateLimiting(options());
  app.use(limiter);
  app.get('/users/:id', limiter.requirePolicy('q'), async (c) => {
    await gate.promise;
    return c.text('ok');
  });
  app.get('/plain/:x', (c) => c.text('ok'));
  await queuedAndHeld(await honoServer(app), '/plain/:x');
});

test('Hono: a sub-app route carries its full path; a request no route matched carries none', async () => {
  const app = new Hono();
  const limiter = honoRateLimiting({ global: concurrency({ permitLimit: 10 }) });
  app.use(limiter);
  const api = new Hono();
  api.get('/items/:id', (c) => c.text('ok'));
  app.route('/api', api);
  const running = await honoServer(app);
  try {
    assert.equal((await fetch(`${running.url}/api/items/3`)).status, 200);
    assert.equal((await fetch(`${running.url}/nowhere`)).status, 404);
  } finally {
    await running.close();
  }
  assert.deepEqual(of('requests'), [
    { policy: 'global', result: 'acquired', 'http.route': '/api/items/:id' },
    { policy: 'global', result: 'acquired' },
  ]);
});

const EXPRESSES = [
  ['Express 5', express],
  ['Express 4', express4],
] as const;

for (const [name, factory] of EXPRESSES) {
  test(`${name}: the app-level middleware labels every route by its template, marked or not (mounted routers too)`, async () => {
    const app = factory();
    const limiter = expressRateLimiting(options());
    app.use(limiter);
    app.get('/users/:id', limiter.requirePolicy('q'), async (_req, res) => {
      await gate.promise;
      res.send('ok');
    });
    app.get('/plain/:x', (_req, res) => {
      res.send('ok');
    });
    await queuedAndHeld(await listen(http.createServer(app)), '/plain/:x');

    recorded = [];
    const mounted = factory();
    const routed = expressRateLimiting(options());
    mounted.use(routed);
    const api = factory.Router();
    api.get('/items/:id', routed.requirePolicy('q'), (_req, res) => {
      res.send('ok');
    });
    api.get('/other/:id', (_req, res) => {
      res.send('ok');
    });
    mounted.use('/api', api);
    const running = await listen(http.createServer(mounted));
    try {
      for (const path of ['/api/items/3', '/api/other/4', '/api/other/5?q=1']) {
        const response = await fetch(`${running.url}${path}`);
        assert.equal(response.status, 200, path);
        await response.text();
      }
      const missing = await fetch(`${running.url}/nowhere`);
      assert.equal(missing.status, 404);
      await missing.text();
    } finally {
      await running.close();
    }
    assert.deepEqual(of('requests'), [
      { policy: 'q', result: 'acquired', 'http.route': '/api/items/:id' },
      { policy: 'global', result: 'acquired', 'http.route': '/api/other/:id' },
      { policy: 'global', result: 'acquired', 'http.route': '/api/other/:id' },
      // No route matched: no template to give.
      { policy: 'global', result: 'acquired' },
    ]);
  });

  test(`${name}: an app without any marker labels its routes too`, async () => {
    const app = factory();
    app.use(expressRateLimiting({ global: concurrency({ permitLimit: 10 }) }));
    const api = factory.Router();
    api.get('/items/:id', (_req, res) => {
      res.send('ok');
    });
    app.use('/api', api);
    app.post('/plain/:x', (_req, res) => {
      res.send('ok');
    });
    const running = await listen(http.createServer(app));
    try {
      for (const [method, path, status] of [
        ['GET', '/api/items/1', 200],
        ['POST', '/plain/2', 200],
        // A route of another method does not match: unlabelled, as Express answers it.
        ['GET', '/plain/2', 404],
      ] as const) {
        const response = await fetch(`${running.url}${path}`, { method });
        assert.equal(response.status, status, `${method} ${path}`);
        await response.text();
      }
      await waitFor('every lease is back', () => of('lease_duration').length === 3);
    } finally {
      await running.close();
    }
    const items = { policy: 'global', 'http.route': '/api/items/:id' };
    const plain = { policy: 'global', 'http.route': '/plain/:x' };
    assert.deepEqual(of('requests'), [
      { ...items, result: 'acquired' },
      { ...plain, result: 'acquired' },
      { policy: 'global', result: 'acquired' },
    ]);
    assert.deepEqual(of('lease_duration'), [items, plain, { policy: 'global' }]);
  });
}

// The bound is the engine's (MAX_TEMPLATES per route setting), reached the same way on Express 4 and 5.
test('Express: a router mounted on a parameter labels only so many distinct routes (the rest unlabelled)', async () => {
  const app = express();
  app.use(expressRateLimiting({ global: concurrency({ permitLimit: 100 }) }));
  const tenant = express.Router();
  tenant.get('/items', (_req, res) => {
    res.send('ok');
  });
  // Express reports the mount point as matched (`req.baseUrl` is `/t/7`): one template per tenant.
  app.use('/t/:tenant', tenant);
  const running = await listen(http.createServer(app));
  const total = MAX_TEMPLATES + 20;
  try {
    for (let i = 0; i < total; i += 50) {
      const batch = [];
      for (let j = i; j < Math.min(total, i + 50); j++) {
        batch.push(fetch(`${running.url}/t/${j}/items`).then((r) => r.text().then(() => r.status)));
      }
      assert.deepEqual(new Set(await Promise.all(batch)), new Set([200]));
    }
  } finally {
    await running.close();
  }
  const routes = of('requests').map((a) => a['http.route']);
  assert.equal(routes.length, total);
  assert.equal(new Set(routes.filter((r) => r !== undefined)).size, MAX_TEMPLATES);
  assert.equal(routes.filter((r) => r === undefined).length, total - MAX_TEMPLATES);
});

test('Express: a marker that decides by itself (no app-level middleware) labels the route too', async () => {
  const app = express();
  const limiter = expressRateLimiting(options());
  app.get('/users/:id', limiter.requirePolicy('q'), async (_req, res) => {
    await gate.promise;
    res.send('ok');
  });
  app.get('/plain/:x', (_req, res) => {
    res.send('ok');
  });
  closeGate();
  gate.open();
  const running = await listen(http.createServer(app));
  try {
    const response = await fetch(`${running.url}/users/5`);
    assert.equal(response.status, 200);
    await response.text();
    await waitFor('the lease is back', () => of('lease_duration').length === 1);
  } finally {
    await running.close();
  }
  const users = { policy: 'q', 'http.route': '/users/:id' };
  assert.deepEqual(of('requests'), [{ ...users, result: 'acquired' }]);
  assert.deepEqual(of('lease_duration'), [users]);
});

test('Koa: a marked @koa/router route carries its path, decided ahead or by the marker', async () => {
  for (const appLevel of [true, false]) {
    recorded = [];
    const app = new Koa();
    const limiter = koaRateLimiting(options());
    if (appLevel) app.use(limiter);
    const router = new Router({ prefix: '/api' });
    router.get('/users/:id', limiter.requirePolicy('q'), (ctx) => {
      ctx.body = 'ok';
    });
    app.use(router.routes());
    const running = await listen(http.createServer(app.callback()));
    try {
      const response = await fetch(`${running.url}/api/users/9`);
      assert.equal(response.status, 200);
      await response.text();
      await waitFor('the lease is back', () => of('lease_duration').length === 1);
    } finally {
      await running.close();
    }
    const users = { policy: 'q', 'http.route': '/api/users/:id' };
    assert.deepEqual(of('requests'), [{ ...users, result: 'acquired' }], `app-level: ${appLevel}`);
    assert.deepEqual(of('lease_duration'), [users], `app-level: ${appLevel}`);
  }
});

test('the attributes of a route under a template are made once, and only so many templates are kept', () => {
  const engine = new RateLimiting(options());
  const route = engine.route('q');
  assert.equal(route.metricsFor('/a/:id'), route.metricsFor('/a/:id'));
  assert.equal(route.metricsFor(undefined), route.metrics);
  assert.deepEqual(route.metricsFor('/a/:id').results.acquired, {
    policy: 'q',
    result: 'acquired',
    'http.route': '/a/:id',
  });
  for (let i = 0; i < MAX_TEMPLATES; i++) route.metricsFor(`/t${i}`);
  assert.equal(route.metricsFor('/one-too-many'), route.metrics);
});

test('a request its policy skips is counted under the global limiter, on the same route', async () => {
  const engine = new RateLimiting({
    global: concurrency({ permitLimit: 10 }),
    policies: { q: { limiter: concurrency({ permitLimit: 1 }), skip: () => true } },
  });
  const route = engine.route('q');
  const decision = await engine.decide(
    undefined,
    undefined,
    route,
    () => undefined,
    undefined,
    route.metricsFor('/a/:id'),
  );
  engine.release(decision);
  assert.deepEqual(of('requests'), [{ policy: 'global', result: 'acquired', 'http.route': '/a/:id' }]);
  assert.deepEqual(of('lease_duration'), [{ policy: 'global', 'http.route': '/a/:id' }]);
});
