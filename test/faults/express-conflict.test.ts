/**
 * Express: a request that floodgate fails itself (two markers of one limiter on a route) is never charged,
 * whether the app-level middleware or the first marker decides.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import express5 from 'express';
import { rateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { fixedWindow } from '../../src/index.ts';

const express4 = createRequire(import.meta.url)('express4') as typeof express5;

for (const [name, factory] of [
  ['express5', express5],
  ['express4', express4],
] as const) {
  for (const appLevel of [true, false]) {
    test(`${name}: two markers of one limiter fail the request uncharged (${appLevel ? 'app-level middleware' : 'markers only'})`, async () => {
      const global = fixedWindow({ permitLimit: 100, window: '1h' });
      const a = fixedWindow({ permitLimit: 100, window: '1h' });
      const b = fixedWindow({ permitLimit: 100, window: '1h' });
      const limiter = rateLimiting({ global, policies: { a, b } });
      const app = factory();
      if (appLevel) app.use(limiter);
      app.get('/both', limiter.requirePolicy('a'), limiter.requirePolicy('b'), (_req, res) => {
        res.send('ok');
      });
      app.get('/one', limiter.requirePolicy('a'), (_req, res) => {
        res.send('ok');
      });
      app.use(
        (error: Error, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
          res.status(500).send(error.message);
        },
      );
      const server = http.createServer(app);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        const response = await fetch(`${base}/both`);
        assert.equal(response.status, 500);
        assert.match(await response.text(), /floodgate:/);
        assert.deepEqual(
          [global.statistics().granted, a.statistics().granted, b.statistics().granted],
          [0, 0, 0],
        );
        assert.equal((await fetch(`${base}/one`)).status, 200);
        assert.deepEqual([global.statistics().granted, a.statistics().granted], [1, 1]);
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });
  }
}
