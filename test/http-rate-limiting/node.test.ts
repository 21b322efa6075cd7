import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { rateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { fixedWindow, partitioned } from '../../src/index.ts';

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

test('node: connect-style middleware decides global + policy once', async () => {
  const global = fixedWindow({ permitLimit: 10, window: '1m' });
  const limit = rateLimiting({ global, policies: { tight: fixedWindow({ permitLimit: 1, window: '1m' }) } });
  const tight = limit.middleware('tight');
  const handler = (req: IncomingMessage, res: ServerResponse) =>
    tight(req, res, (error) => {
      res.statusCode = error === undefined ? 200 : 500;
      res.end();
    });
  await serve(handler, async (base) => {
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await fetch(base)).status);
    assert.deepEqual(statuses, [200, 429, 429]);
    assert.equal(global.statistics().available, 9);
  });
});

test('node: an outer wrapper cannot silently drop an inner route policy', async () => {
  const limit = rateLimiting({
    global: fixedWindow({ permitLimit: 10, window: '1m' }),
    policies: { tight: fixedWindow({ permitLimit: 1, window: '1m' }) },
  });
  const inner = limit((_req, res) => res.end('ok'), 'tight');
  const same = limit((_req, res) => res.end('ok'));
  const outer = limit((req: IncomingMessage, res: ServerResponse) =>
    (req.url === '/same' ? same : inner)(req, res),
  );
  await serve(outer, async (base) => {
    const nested = await fetch(`${base}/tight`);
    assert.equal(nested.status, 500);
    assert.match(await nested.text(), /already rate-limited by an outer wrapper/);
    assert.equal((await fetch(`${base}/same`)).status, 200, 'the same setting twice is one decision');
  });
});

test('node: the key function runs once per admitted request, and the limiter is left as built', async () => {
  let calls = 0;
  const key = (req: { url?: string }) => {
    calls++;
    return req.url ?? '/';
  };
  const perPath = partitioned({ key, limiter: fixedWindow({ permitLimit: 5, window: '1m' }) });
  const limit = rateLimiting({
    global: perPath,
    policies: { tight: fixedWindow({ permitLimit: 1, window: '1m' }) },
  });
  const handler = limit((_req, res) => res.end('ok'), 'tight');
  await serve(handler, async (base) => {
    const first = await fetch(`${base}/a`);
    assert.equal(first.status, 200);
    assert.match(first.headers.get('ratelimit') ?? '', /"global";r=4;t=\d+;pk=:[^:]+:, "tight";r=0/);
    assert.equal(calls, 1, `the admitted request's headers reuse the lease's key; key() ran ${calls} times`);
    const second = await fetch(`${base}/a`);
    assert.equal(second.status, 429);
    assert.match(second.headers.get('ratelimit') ?? '', /"global";r=4;pk=:[^:]+:/);
    assert.equal(perPath.keyOf, key, 'the HTTP layer does not replace the key function');
  });
});
