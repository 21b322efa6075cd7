import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { rateLimiting, requestTimeoutOf, requestTimeouts } from '../../src/adapters/node/index.ts';
import { concurrency } from '../../src/index.ts';

test('node: a handler inside rate limiting inside timeouts may rethrow its abort without an unhandled rejection', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  const pool = concurrency({ permitLimit: 1 });
  const limit = rateLimiting({ global: pool });
  const timeouts = requestTimeouts({ default: 100 });
  const server = createServer(
    timeouts(
      limit(async (req, res) => {
        const { signal } = requestTimeoutOf(req)!;
        await sleep(5_000, undefined, { signal }); // rejects with the signal's TimeoutError at the deadline
        res.end('too late');
      }),
    ),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(response.status, 504, 'the timeout answered');
    await response.arrayBuffer();
    await sleep(50);
    assert.deepEqual(unhandled, [], 'no unhandled rejection');
    assert.equal(pool.statistics().available, 1, 'the permit came back');
  } finally {
    process.off('unhandledRejection', onUnhandled);
    server.close();
  }
});
