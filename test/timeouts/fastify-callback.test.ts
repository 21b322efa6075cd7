/** Fastify handlers that answer through a callback (no promise): done is their `reply.send()`, even late. */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import { requestTimeouts } from '../../src/adapters/fastify/index.ts';

test('a callback-style handler is done at its late reply.send(), which is dropped without a warning', async () => {
  const logs = new PassThrough();
  const warnings: string[] = [];
  logs.on('data', (line: Buffer) => {
    const entry = JSON.parse(line.toString());
    if (entry.level >= 40) warnings.push(entry.msg);
  });
  const app = Fastify({ logger: { level: 'info', stream: logs } });
  await app.register(requestTimeouts, { default: '100ms' });
  let start = 0;
  let doneAfter = -1;
  app.get('/callback', (request, reply) => {
    start = performance.now();
    request.requestTimeout!.onHandlerDone(() => {
      doneAfter = performance.now() - start;
    });
    setTimeout(() => reply.send('late'), 400);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const { port } = app.server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/callback`);
    assert.equal(res.status, 504);
    assert.equal(await res.text(), '');
    assert.equal(doneAfter, -1, 'done before the handler sent anything');
    await sleep(600);
    assert.ok(doneAfter >= 380, `done after ${doneAfter} ms`);
    assert.deepEqual(warnings, []);
  } finally {
    await app.close();
  }
});
