import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import express from 'express';
import { rateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { fixedWindow } from '../../src/index.ts';

const express4 = createRequire(import.meta.url)('express4') as typeof express;

async function serve(app: express.Express, run: (base: string) => Promise<void>): Promise<void> {
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/** Express routes after the app-level middleware: the route lookahead is what keeps global + policy one chain. */
for (const [name, factory] of [
  ['express 5', express],
  ['express 4', express4],
] as const) {
  describe(`${name}: the app-level middleware finds the route's marker`, () => {
    test('in a router mounted under a prefix, with params', async () => {
      const global = fixedWindow({ permitLimit: 10, window: '1m' });
      const tight = fixedWindow({ permitLimit: 1, window: '1m' });
      const limiter = rateLimiting({ global, policies: { tight } });
      const app = factory();
      app.use(limiter);
      const router = factory.Router();
      router.get('/items/:id', limiter.requirePolicy('tight'), (_req, res) => {
        res.send('ok');
      });
      router.get('/free', (_req, res) => {
        res.send('ok');
      });
      app.use('/api', router);
      await serve(app, async (base) => {
        const statuses = [];
        for (const id of [1, 2, 3]) statuses.push((await fetch(`${base}/api/items/${id}?q=1`)).status);
        assert.deepEqual(statuses, [200, 429, 429]);
        const free = await fetch(`${base}/api/free`);
        assert.equal(free.status, 200);
        assert.match(
          free.headers.get('ratelimit')!,
          /^"global";r=8;/,
          'rejected requests cost no global permit',
        );
        assert.equal((await fetch(`${base}/nowhere`)).status, 404);
        assert.equal(global.statistics().available, 7, 'a 404 is limited globally');
      });
    });

    test('a middleware that rewrites the URL to a marked route fails the request instead of skipping the policy', async () => {
      const limiter = rateLimiting({
        global: fixedWindow({ permitLimit: 10, window: '1m' }),
        policies: { tight: fixedWindow({ permitLimit: 1, window: '1m' }) },
      });
      const app = factory();
      app.use(limiter);
      app.use((req, _res, next) => {
        if (req.url === '/old') req.url = '/new';
        next();
      });
      app.get('/new', limiter.requirePolicy('tight'), (_req, res) => {
        res.send('ok');
      });
      app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
        res.status(500).send(error.message);
      });
      await serve(app, async (base) => {
        assert.equal((await fetch(`${base}/new`)).status, 200);
        const rewritten = await fetch(`${base}/old`);
        assert.equal(rewritten.status, 500);
        assert.match(await rewritten.text(), /already decided without it/);
      });
    });
  });
}
