import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import express from 'express';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { requestTimeouts as expressTimeouts } from '../../src/adapters/express/timeouts.ts';
import { rateLimiting as nodeRateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { requestTimeouts as nodeTimeouts } from '../../src/adapters/node/timeouts.ts';
import { concurrency } from '../../src/index.ts';

/**
 * Queue time counts against the request's deadline: a request still queued at its deadline leaves the queue
 * (nothing charged, nobody left waiting) and the client gets the timeout answer.
 */
async function check(server: http.Server, slots: ReturnType<typeof concurrency>): Promise<void> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const holder = fetch(`${base}/long`);
    // Wait until the holder has its permit (under load its request may take a while to arrive), never a fixed sleep.
    for (let i = 0; i < 500 && slots.statistics().available !== 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(slots.statistics().available, 0);
    const queued = await fetch(`${base}/short`);
    assert.equal(queued.status, 504);
    assert.equal(holderDone, false, 'answered at the deadline, not when the holder finished');
    assert.equal(slots.statistics().queued, 0);
    assert.equal((await holder).status, 200);
    assert.equal(slots.statistics().available, 1);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

// The holder keeps its permit far past the 300 ms deadline, so the order of the answers shows which came first.
let holderDone = false;
const slow = (_req: IncomingMessage, res: ServerResponse) => {
  holderDone = false;
  setTimeout(() => {
    holderDone = true;
    res.end('done');
  }, 2000);
};
const fast = (_req: IncomingMessage, res: ServerResponse) => res.end('done');

test('node: a queued request times out in the queue', async () => {
  const slots = concurrency({ permitLimit: 1, queueLimit: 4 });
  const limit = nodeRateLimiting({ policies: { slots } });
  const timed = nodeTimeouts({ default: '300ms' });
  const long = timed(limit(slow, 'slots'), false);
  const short = timed(limit(fast, 'slots'));
  await check(
    http.createServer((req, res) => (req.url === '/long' ? long : short)(req, res)),
    slots,
  );
});

test('express: a queued request times out in the queue', async () => {
  const slots = concurrency({ permitLimit: 1, queueLimit: 4 });
  const limiter = expressRateLimiting({ policies: { slots } });
  const timeouts = expressTimeouts({ default: '300ms' });
  const app = express();
  app.use(timeouts);
  app.use(limiter);
  app.get('/long', timeouts.route(false), limiter.requirePolicy('slots'), slow);
  app.get('/short', limiter.requirePolicy('slots'), fast);
  await check(http.createServer(app), slots);
});

test('node: a held permit comes back when the request times out, though its handler runs on', async () => {
  const slots = concurrency({ permitLimit: 1 });
  const limit = nodeRateLimiting({ policies: { slots } });
  const timed = nodeTimeouts({ default: '200ms' });
  const server = http.createServer(timed(limit(slow, 'slots')));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    assert.equal((await fetch(base)).status, 504);
    for (let i = 0; i < 50 && slots.statistics().available === 0; i++)
      await new Promise((r) => setTimeout(r, 10));
    assert.equal(slots.statistics().available, 1);
    assert.equal((await fetch(base)).status, 504, 'the next request got the permit (and timed out too)');
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
