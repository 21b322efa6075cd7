/**
 * floodgate/hono off @hono/node-server (`app.request`, web Request/Response only), where the shared flow has no
 * node response to watch: the refund rule reads the route's own result (a 500, a throw) and a held permit comes
 * back when the route settles.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono } from 'hono';
import { rateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { concurrency, fixedWindow } from '../../src/index.ts';

test('skipFailedRequests on web objects: a 500 and a throw are refunded, a 200 is charged', async () => {
  const clock = { t: 0, now: () => clock.t };
  const limiter = rateLimiting({
    global: fixedWindow({ permitLimit: 1, window: '1m', clock }),
    skipFailedRequests: true,
  });
  const app = new Hono();
  app.use(limiter);
  app.get('/fail', (c) => c.text('no', 500));
  app.get('/throw', () => {
    throw new Error('boom');
  });
  app.get('/ok', (c) => c.text('ok'));
  app.onError((_error, c) => c.text('failed', 500));
  assert.equal((await app.request('/fail')).status, 500);
  assert.equal((await app.request('/throw')).status, 500);
  assert.equal((await app.request('/ok')).status, 200, 'both failures were refunded');
  assert.equal((await app.request('/ok')).status, 429, 'the success was charged');
  clock.t = 60_000;
  assert.equal((await app.request('/ok')).status, 200);
});

test('a concurrency permit comes back when the route settles, and a rejection answers 429', async () => {
  const slots = concurrency({ permitLimit: 1 });
  const limiter = rateLimiting({ global: slots });
  const app = new Hono();
  app.use(limiter);
  let release: () => void = () => {};
  app.get('/hold', async (c) => {
    await new Promise<void>((resolve) => {
      release = resolve;
    });
    return c.text('held');
  });
  app.get('/ok', (c) => c.text('ok'));
  const held = app.request('/hold');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(slots.statistics().available, 0);
  const rejected = await app.request('/ok');
  assert.equal(rejected.status, 429);
  release();
  assert.equal((await held).status, 200);
  assert.equal(slots.statistics().available, 1);
  assert.equal((await app.request('/ok')).status, 200);
});

test('a cost on web objects: the real cost is read once the route settles (a throw keeps the estimate)', async () => {
  const budget = fixedWindow({ permitLimit: 100, window: '1m', unit: 'tokens', clock: { now: () => 0 } });
  const limiter = rateLimiting<{ Variables: { tokens?: number } }>({
    policies: {
      chat: {
        limiter: budget,
        cost: {
          estimate: (c) => Number(c.req.header('x-estimate')),
          actual: (c) => c.get('tokens'),
        },
      },
    },
  });
  const app = new Hono<{ Variables: { tokens?: number } }>();
  app.use(limiter);
  app.get('/chat', limiter.requirePolicy('chat'), (c) => {
    c.set('tokens', Number(c.req.query('used')));
    return c.text('ok');
  });
  app.get('/throw', limiter.requirePolicy('chat'), () => {
    throw new Error('boom');
  });
  app.onError((_error, c) => c.text('failed', 500));
  const first = await app.request('/chat?used=10', { headers: { 'x-estimate': '30' } });
  assert.equal(first.headers.get('ratelimit'), '"tokens";r=70;t=60');
  assert.equal(budget.statistics().available, 90, 'settled when the route settled');
  assert.equal((await app.request('/throw', { headers: { 'x-estimate': '20' } })).status, 500);
  assert.equal(budget.statistics().available, 70, 'the estimate stands');
});
