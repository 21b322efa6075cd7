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
