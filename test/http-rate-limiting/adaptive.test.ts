import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { rateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { outcomeOfStatus } from '../../src/http/rate-limiting/engine.ts';
import { adaptiveConcurrency } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';
import { adapters, get } from './apps.ts';

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
    timeout: '1h', // a fixed threshold: nothing probed, the limit starts at 10
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
    assert.equal(
      global.statistics().limit,
      3,
      'a 200 that used under half the limit: no growth; the unused limit moves halfway to twice the use (3.5)',
    );
    hang = true;
    const controller = new AbortController();
    const gone = fetch(base, { signal: controller.signal }).catch(() => undefined);
    for (let i = 0; i < 10_000 && global.statistics().inFlight === 0; i++)
      await new Promise((r) => setImmediate(r));
    controller.abort();
    await gone;
    for (let i = 0; i < 10_000 && global.statistics().inFlight > 0; i++)
      await new Promise((r) => setImmediate(r));
    assert.equal(global.statistics().inFlight, 0);
    assert.equal(global.statistics().limit, 3, 'an aborted request is ignored, and its permit comes back');
  });
});

for (const [adapter, start] of Object.entries(adapters)) {
  test(`${adapter}: an adaptive global limit admits up to its limit, sheds the rest, and gets every permit back`, async () => {
    const clock = manualClock(0, false);
    const global = adaptiveConcurrency({ algorithm: 'aimd', initialLimit: 2, maxLimit: 2, clock });
    const app = await start({ options: { global }, routes: [{ path: '/' }] });
    try {
      const slow = [get(`${app.url}/?delay=150`), get(`${app.url}/?delay=150&throw=1`)];
      for (let i = 0; i < 400 && global.statistics().inFlight < 2; i++)
        await new Promise((r) => setTimeout(r, 5));
      const third = await get(`${app.url}/`);
      assert.equal(third.status, 429);
      const answers = await Promise.all(slow);
      assert.equal(answers[0].status, 200);
      assert.equal(answers[1].status, 500, 'the throwing handler answers 500');
      for (let i = 0; i < 400 && global.statistics().inFlight > 0; i++)
        await new Promise((r) => setTimeout(r, 5));
      assert.equal(global.statistics().inFlight, 0, 'no permit leaked');
      assert.equal((await get(`${app.url}/`)).status, 200, 'both permits came back');
    } finally {
      await app.close();
    }
  });
}

test('a finished response tells the limiter: 502, 503, 504 are drops; others successes; an unfinished one nothing', () => {
  assert.deepEqual(
    [200, 404, 429, 500, 501, 502, 503, 504, 505].map((status) => outcomeOfStatus(true, status)),
    [
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      { dropped: true },
      { dropped: true },
      { dropped: true },
      undefined,
    ],
  );
  assert.deepEqual(outcomeOfStatus(false, 200), { ignore: true });
});
