/**
 * `app.use(requestTimeouts)` with floodgate/http's engine factory instead of the adapter's: each request gets a
 * TypeError on the framework's error path that says what to import, not "unknown option _events".
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import express5 from 'express';
import Koa from 'koa';
import { RequestTimeouts, requestTimeouts } from '../../src/http/index.ts';

const express4 = createRequire(import.meta.url)('express4') as typeof express5;

for (const [name, express] of [
  ['express4', express4],
  ['express5', express5],
] as const) {
  test(`${name}: app.use(requestTimeouts from floodgate/http) says to import floodgate/express's`, async () => {
    const app = express();
    const errors: unknown[] = [];
    app.use(requestTimeouts as never);
    app.get('/', (_req, res) => void res.send('ok'));
    app.use((error: unknown, _req: unknown, res: express5.Response, _next: unknown) => {
      errors.push(error);
      res.status(500).send('error');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      assert.equal(response.status, 500);
      assert.equal(errors.length, 1);
      assert.ok(errors[0] instanceof TypeError);
      assert.match((errors[0] as Error).message, /Import requestTimeouts from 'floodgate\/express'/);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
}

test('koa: app.use(requestTimeouts from floodgate/http) throws the same TypeError into Koa', async () => {
  const app = new Koa();
  const errors: unknown[] = [];
  app.silent = true;
  app.on('error', (error) => errors.push(error));
  app.use(requestTimeouts as never);
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    assert.equal(response.status, 500);
    assert.match((errors[0] as Error).message, /floodgate\/koa/);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('an options object is still an options object', () => {
  assert.ok(requestTimeouts({ default: '5s' }) instanceof RequestTimeouts);
  assert.throws(() => requestTimeouts({ defualt: '5s' } as never), /did you mean "default"/);
});
