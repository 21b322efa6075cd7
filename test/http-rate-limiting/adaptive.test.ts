import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { rateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { adaptiveConcurrency } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';

async function serve(handler: http.RequestListener, run: (base: string) => Promise<void>): Promise<void> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

test('node: an adaptive global limit holds a permit per request until the response finishes', async () => {
  const clock = manualClock(0, false);
  const global = adaptiveConcurrency({ algorithm: 'aimd', initialLimit: 2, maxLimit: 2, clock });
  const gates: (() => void)[] = [];
  const arrived: (() => void)[] = [];
  const limit = rateLimiting({ global });
  const handler = limit((_req: IncomingMessage, res: ServerResponse) => {
    gates.push(() => res.end('ok'));
    arrived.shift()?.();
  });
  await serve(handler, async (base) => {
    const inside = Array.from({ length: 2 }, () => new Promise<void>((r) => arrived.push(r)));
    const slow = [fetch(base), fetch(base)];
    await Promise.all(inside);
    assert.equal(global.statistics().inFlight, 2);
    const third = await fetch(base);
    assert.equal(third.status, 429);
    assert.match(third.headers.get('ratelimit') ?? '', /"global";r=0/);
    for (const open of gates) open();
    assert.deepEqual(
      (await Promise.all(slow)).map((r) => r.status),
      [200, 200],
    );
    assert.equal(global.statistics().inFlight, 0);
  });
});

test('node: 503/504 responses are reported as drops (the limit backs off); 200s teach latency; aborted clients nothing', async () => {
  const clock = manualClock(0, false);
  const global = adaptiveConcurrency({
    algorithm: 'aimd',
    initialLimit: 10,
    maxLimit: 10,
    backoffRatio: 0.5,
    window: 1,
    minSamples: 1,
    clock,
  });
  let status = 503;
  let hang = false;
  const limit = rateLimiting({ global });
  const handler = limit((_req: IncomingMessage, res: ServerResponse) => {
    if (hang) return; // never answers: the client will go away
    clock.advance(5);
    res.statusCode = status;
    res.end();
  });
  await serve(handler, async (base) => {
    const first = await fetch(base);
    await first.arrayBuffer();
    assert.equal(first.status, 503);
    await new Promise((r) => setImmediate(r));
    assert.equal(global.statistics().limit, 5, 'a 503 is a drop: 10 × 0.5');
    status = 200;
    await (await fetch(base)).arrayBuffer();
    await new Promise((r) => setImmediate(r));
    assert.equal(global.statistics().limit, 5, 'a 200 used under half the limit: no growth, no cut');
    hang = true;
    const controller = new AbortController();
    const gone = fetch(base, { signal: controller.signal }).catch(() => undefined);
    while (global.statistics().inFlight === 0) await new Promise((r) => setImmediate(r));
    controller.abort();
    await gone;
    while (global.statistics().inFlight > 0) await new Promise((r) => setImmediate(r));
    assert.equal(global.statistics().limit, 5, 'an aborted request is ignored, and its permit comes back');
  });
});
