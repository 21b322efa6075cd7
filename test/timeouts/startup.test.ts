/** A route timeout is never silently ignored: bad names fail at startup, a missing middleware fails loudly. */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { createAdaptorServer } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { requestTimeouts as expressTimeouts } from '../../src/adapters/express/index.ts';
import { requestTimeouts as fastifyTimeouts } from '../../src/adapters/fastify/index.ts';
import { requestTimeouts as honoTimeouts } from '../../src/adapters/hono/index.ts';
import { requestTimeouts as nodeTimeouts } from '../../src/adapters/node/index.ts';
import type { RequestTimeoutsOptions } from '../../src/http/index.ts';

const options: RequestTimeoutsOptions = { default: '5s', policies: { slow: '30s' } };

async function fetchOnce(server: http.Server, path: string): Promise<{ status: number; body: string }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`);
    return { status: res.status, body: await res.text() };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('an unknown policy name fails where the route is declared', () => {
  test('node:http', () => {
    const wrap = nodeTimeouts(options);
    assert.throws(() => wrap(() => {}, 'slwo'), /no timeout policy named "slwo" \(known: "slow"\)/);
  });

  test('Express', () => {
    const timeouts = expressTimeouts(options);
    assert.throws(() => timeouts.route('slwo'), RangeError);
  });

  test('Hono', () => {
    const timeouts = honoTimeouts(options);
    assert.throws(() => timeouts.route('slwo'), RangeError);
  });

  test('Fastify: config.timeout is checked when the route is added', async () => {
    const app = Fastify();
    await app.register(fastifyTimeouts, options);
    assert.throws(
      () => app.get('/r', { config: { timeout: 'slwo' } }, async () => 'ok'),
      /route GET \/r: config\.timeout: no timeout policy named "slwo"/,
    );
    await app.close();
  });

  test('Fastify: in a plugin registered after the timeouts plugin, startup fails', async () => {
    const app = Fastify();
    app.register(fastifyTimeouts, options);
    app.register(async (child) => {
      child.get('/r', { config: { timeout: 'slwo' } }, async () => 'ok');
    });
    await assert.rejects(async () => await app.ready(), /no timeout policy named "slwo"/);
  });

  test('Fastify: bad plugin options fail startup', async () => {
    const app = Fastify();
    app.register(fastifyTimeouts, { default: '5 seconds' } as never);
    await assert.rejects(async () => await app.ready(), TypeError);
  });
});

describe('a route timeout without its middleware fails on the first request, naming the fix', () => {
  test('Express', async () => {
    const app = express();
    const timeouts = expressTimeouts(options);
    const errors: Error[] = [];
    app.get('/r', timeouts.route('slow'), (_req, res) => {
      res.send('ran without a timeout');
    });
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error);
      res.status(500).send('error');
    });
    const answer = await fetchOnce(http.createServer(app), '/r');
    assert.equal(answer.status, 500);
    assert.match(errors[0]?.message ?? '', /install it with app\.use\(\) before the routes/);
  });

  test('Hono', async () => {
    const app = new Hono();
    const timeouts = honoTimeouts(options);
    const errors: Error[] = [];
    app.onError((error, c) => {
      errors.push(error);
      return c.text('error', 500);
    });
    app.get('/r', timeouts.route('slow'), (c) => c.text('ran without a timeout'));
    const answer = await fetchOnce(createAdaptorServer({ fetch: app.fetch }) as http.Server, '/r');
    assert.equal(answer.status, 500);
    assert.match(errors[0]?.message ?? '', /install it with app\.use\(\) before the routes/);
  });

  test('Fastify: a route added before the plugin still gets its timeout, checked on its first request', async () => {
    const app = Fastify();
    app.get('/early', { config: { timeout: '50ms' } }, async (request) => {
      await new Promise((resolve) => setTimeout(resolve, 400));
      return `policy ${request.requestTimeout?.policy}`;
    });
    await app.register(fastifyTimeouts, options);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/early`);
    assert.equal(res.status, 504);
    await app.close();
  });
});
