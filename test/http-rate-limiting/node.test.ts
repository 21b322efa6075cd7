import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { rateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { fixedWindow } from '../../src/index.ts';

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
