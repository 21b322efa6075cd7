/**
 * Hono: routes marked with `requirePolicy` inside a sub-app mounted with `app.route()` work whether or not the
 * sub-app has its own `onError` (Hono then wraps each of its handlers, hiding the marker from `matchedRoutes`),
 * and a request that floodgate fails itself (two markers of one limiter on a route) is never charged.
 */
import assert from 'node:assert/strict';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { rateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { fixedWindow } from '../../src/index.ts';

async function serveApp(app: Hono): Promise<{ url: string; close(): Promise<void> }> {
  let server!: http.Server;
  await new Promise<void>((resolve) => {
    server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve()) as http.Server;
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

for (const withOnError of [false, true]) {
  test(`a marked route in a sub-app ${withOnError ? 'with' : 'without'} its own onError`, async () => {
    const global = fixedWindow({ permitLimit: 100, window: '1h' });
    const strict = fixedWindow({ permitLimit: 2, window: '1h' });
    const limiter = rateLimiting({ global, policies: { strict } });
    const app = new Hono();
    app.use(limiter);
    const api = new Hono();
    const errors: unknown[] = [];
    if (withOnError) {
      api.onError((error, c) => {
        errors.push(error);
        return c.text(`api error: ${error.message}`, 500);
      });
    }
    api.get('/strict', limiter.requirePolicy('strict'), (c) => c.text('ok'));
    api.get('/open', (c) => c.text('ok'));
    app.route('/api', api);
    const served = await serveApp(app);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await fetch(`${served.url}/api/strict`)).status);
      statuses.push((await fetch(`${served.url}/api/open`)).status);
      assert.deepEqual(statuses, [200, 200, 429, 200]);
      assert.deepEqual(errors, []);
      assert.equal(strict.statistics().granted, 2);
      assert.equal(global.statistics().granted, 3, 'global: two strict requests and the open one');
    } finally {
      await served.close();
    }
  });
}

test('a request floodgate fails itself (two markers of one limiter) is not charged', async () => {
  const global = fixedWindow({ permitLimit: 100, window: '1h' });
  const a = fixedWindow({ permitLimit: 100, window: '1h' });
  const b = fixedWindow({ permitLimit: 100, window: '1h' });
  const limiter = rateLimiting({ global, policies: { a, b } });
  for (const appLevel of [true, false]) {
    const app = new Hono();
    if (appLevel) app.use(limiter);
    app.onError((error, c) => c.text(error.message, 500));
    app.get('/both', limiter.requirePolicy('a'), limiter.requirePolicy('b'), (c) => c.text('ok'));
    const served = await serveApp(app);
    try {
      const response = await fetch(`${served.url}/both`);
      assert.equal(response.status, 500);
      assert.match(await response.text(), /floodgate:/);
      assert.deepEqual(
        [global.statistics().granted, a.statistics().granted, b.statistics().granted],
        [0, 0, 0],
        `appLevel=${appLevel}`,
      );
    } finally {
      await served.close();
    }
  }
});
