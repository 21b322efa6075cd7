/**
 * A key per route on Hono: the key runs in the app-level middleware, where `c.req.routePath` is the middleware's
 * own `'/*'` (one bucket for every route); `routeTemplate(c)` gives the route the request will reach, the same
 * one floodgate labels its metrics with. Over real sockets through @hono/node-server.
 */
import assert from 'node:assert/strict';
import type http from 'node:http';
import { test } from 'node:test';
import { serve } from '@hono/node-server';
import { type Context, Hono } from 'hono';
import { routePath } from 'hono/route';
import { rateLimiting, routeTemplate } from '../../src/adapters/hono/rate-limiting.ts';
import { fixedWindow, partitioned } from '../../src/index.ts';

async function statuses(key: (c: Context) => string, paths: string[]): Promise<number[]> {
  const app = new Hono();
  app.use(
    rateLimiting({ global: partitioned({ key, limiter: fixedWindow({ permitLimit: 1, window: '1m' }) }) }),
  );
  app.get('/a', (c) => c.text('a'));
  app.get('/items/:id', (c) => c.text('item'));
  const api = new Hono();
  api.get('/status', (c) => c.text('status'));
  app.route('/api', api);
  // A middleware registered after the routes is matched too (and never runs): the route is not the last match.
  app.use(async (_c, next) => next());
  const server = await new Promise<{ url: string; server: http.Server }>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
      resolve({ url: `http://127.0.0.1:${info.port}`, server: s as http.Server }),
    );
  });
  try {
    const seen: number[] = [];
    for (const path of paths) seen.push((await fetch(`${server.url}${path}`)).status);
    return seen;
  } finally {
    server.server.closeAllConnections();
    await new Promise((done) => server.server.close(done));
  }
}

const paths = ['/a', '/a', '/items/1', '/items/2', '/api/status', '/api/status'];

test('routeTemplate(c) keys per route: two routes, two buckets; one template, one bucket', async () => {
  assert.deepEqual(await statuses((c) => routeTemplate(c) ?? 'none', paths), [200, 429, 200, 429, 200, 429]);
});

test("c.req.routePath, in the key, is the middleware's '/*': every route shares one bucket", async () => {
  assert.deepEqual(await statuses((c) => c.req.routePath, paths), [200, 429, 429, 429, 429, 429]);
});

test("routePath(c, -1) of hono/route is the last match: a middleware registered after the routes, '/*'", async () => {
  assert.deepEqual(await statuses((c) => routePath(c, -1), paths), [200, 429, 429, 429, 429, 429]);
});
