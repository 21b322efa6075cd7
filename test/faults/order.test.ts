/**
 * Express and Hono: a timeouts middleware that runs after floodgate's rate limiter warns once
 * (FLOODGATE_MIDDLEWARE_ORDER, a FloodgateWarning): queue time would not count against the deadline. The documented order is silent.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import express from 'express';
import { Hono } from 'hono';
import { rateLimiting as expressLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { requestTimeouts as expressTimeouts } from '../../src/adapters/express/timeouts.ts';
import { rateLimiting as honoLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { requestTimeouts as honoTimeouts } from '../../src/adapters/hono/timeouts.ts';
import { fixedWindow } from '../../src/index.ts';

async function warningsDuring(run: () => Promise<void>): Promise<string[]> {
  const codes: string[] = [];
  const onWarning = (warning: Error & { code?: string }) =>
    codes.push(`${warning.name}:${warning.code ?? ''}`);
  process.on('warning', onWarning);
  try {
    await run();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  return codes.filter((code) => code.includes(':FLOODGATE'));
}

const global = () => fixedWindow({ permitLimit: 100, window: '1h' });

for (const limiterFirst of [true, false]) {
  test(`express: limiter ${limiterFirst ? 'before' : 'after'} the timeouts middleware`, async () => {
    const app = express();
    const limiter = expressLimiting({ global: global() });
    const timeouts = expressTimeouts({ default: '5s' });
    if (limiterFirst) app.use(limiter, timeouts);
    else app.use(timeouts, limiter);
    app.get('/', (_req, res) => void res.send('ok'));
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      const codes = await warningsDuring(async () => {
        for (let i = 0; i < 3; i++) assert.equal((await fetch(url)).status, 200);
      });
      assert.deepEqual(codes, limiterFirst ? ['FloodgateWarning:FLOODGATE_MIDDLEWARE_ORDER'] : []);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test(`hono: limiter ${limiterFirst ? 'before' : 'after'} the timeouts middleware`, async () => {
    const app = new Hono();
    const limiter = honoLimiting({ global: global() });
    const timeouts = honoTimeouts({ default: '5s' });
    if (limiterFirst) app.use(limiter, timeouts);
    else app.use(timeouts, limiter);
    app.get('/', (c) => c.text('ok'));
    const codes = await warningsDuring(async () => {
      for (let i = 0; i < 3; i++) assert.equal((await app.request('/')).status, 200);
    });
    assert.deepEqual(codes, limiterFirst ? ['FloodgateWarning:FLOODGATE_MIDDLEWARE_ORDER'] : []);
  });
}
