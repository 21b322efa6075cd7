/**
 * Fastify: floodgate's route config key cannot collide with @fastify/rate-limit's (both plugins in one app, each
 * applying its own limit), the old `config.rateLimit` still works when @fastify/rate-limit is not registered, and
 * a floodgate route option whose plugin is missing fails `ready()` when another floodgate plugin can see it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fastifyRateLimit from '@fastify/rate-limit';
import Fastify from 'fastify';
import { rateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { requestTimeouts } from '../../src/adapters/fastify/timeouts.ts';
import { fixedWindow } from '../../src/index.ts';

async function statuses(app: ReturnType<typeof Fastify>, url: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await app.inject({ method: 'GET', url })).statusCode);
  return out;
}

test('floodgate beside @fastify/rate-limit: each plugin applies its own route config', async () => {
  const strict = fixedWindow({ permitLimit: 3, window: '1h' });
  const both = fixedWindow({ permitLimit: 5, window: '1h' });
  const app = Fastify();
  await app.register(fastifyRateLimit, { global: false });
  await app.register(rateLimiting, { policies: { strict, both } });
  app.get('/theirs', { config: { rateLimit: { max: 2, timeWindow: '1 hour' } } }, async () => 'ok');
  app.get('/ours', { config: { rateLimiting: 'strict' } }, async () => 'ok');
  app.get(
    '/both',
    { config: { rateLimit: { max: 1, timeWindow: '1 hour' }, rateLimiting: 'both' } },
    async () => 'ok',
  );
  await app.ready();
  try {
    assert.deepEqual(await statuses(app, '/theirs', 3), [200, 200, 429]);
    assert.equal(strict.statistics().granted, 0, 'floodgate leaves their config alone');
    assert.deepEqual(await statuses(app, '/ours', 4), [200, 200, 200, 429]);
    // Both apply on one route, each from its own key: floodgate's app-level hook admits both requests, then
    // @fastify/rate-limit's route-level one rejects the second.
    assert.deepEqual(await statuses(app, '/both', 2), [200, 429]);
    assert.equal(both.statistics().granted, 2);
  } finally {
    await app.close();
  }
});

test('the old config.rateLimit still works when @fastify/rate-limit is not registered', async () => {
  const strict = fixedWindow({ permitLimit: 1, window: '1h' });
  const app = Fastify();
  await app.register(rateLimiting, { policies: { strict } });
  app.get('/legacy', { config: { rateLimit: 'strict' } as never }, async () => 'ok');
  await app.ready();
  try {
    assert.deepEqual(await statuses(app, '/legacy', 2), [200, 429]);
  } finally {
    await app.close();
  }
});

test('config.rateLimiting without the rate-limiting plugin fails ready() (seen by the timeouts plugin)', async () => {
  const app = Fastify();
  await app.register(requestTimeouts, { default: '5s' });
  app.get('/search', { config: { rateLimiting: 'search' } }, async () => 'ok');
  await assert.rejects(
    async () => void (await app.ready()),
    /config\.rateLimiting.*rateLimiting plugin is not registered/,
  );
});

test('config.timeout without the timeouts plugin fails ready() (seen by the rate-limiting plugin)', async () => {
  const app = Fastify();
  await app.register(rateLimiting, {});
  app.get('/slow', { config: { timeout: '2s' } }, async () => 'ok');
  await assert.rejects(
    async () => void (await app.ready()),
    /config\.timeout.*requestTimeouts plugin is not registered/,
  );
});

test('requestTimeouts registered after rateLimiting warns that queue time would not count', async () => {
  const warnings: Array<{ code?: string }> = [];
  const onWarning = (warning: Error & { code?: string }) => warnings.push(warning);
  process.on('warning', onWarning);
  try {
    const app = Fastify();
    await app.register(rateLimiting, {});
    await app.register(requestTimeouts, { default: '5s' });
    await app.ready();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(
      warnings.map((w) => `${(w as Error).name}:${w.code}`),
      ['FloodgateWarning:FLOODGATE_PLUGIN_ORDER'],
    );
    const right = Fastify();
    await right.register(requestTimeouts, { default: '5s' });
    await right.register(rateLimiting, {});
    await right.ready();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(warnings.length, 1, 'no warning in the documented order');
    await Promise.all([app.close(), right.close()]);
  } finally {
    process.off('warning', onWarning);
  }
});
