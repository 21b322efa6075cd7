/** Fastify handlers that answer through a callback (no promise): done is their `reply.send()`, even late. */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
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
  // The handler answers when the test says so (after the 504), not after a sleep: nothing here is timed.
  let answer: (() => void) | undefined;
  let done = false;
  let handlerDone: () => void = () => {};
  const doneSeen = new Promise<void>((resolve) => {
    handlerDone = resolve;
  });
  app.get('/callback', (request, reply) => {
    request.requestTimeout!.onHandlerDone(() => {
      done = true;
      handlerDone();
    });
    answer = () => reply.send('late');
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const { port } = app.server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/callback`);
    assert.equal(res.status, 504);
    assert.equal(await res.text(), '');
    assert.equal(done, false, 'not done before the handler sent anything');
    answer!();
    await doneSeen;
    assert.equal(done, true, 'done at its late reply.send()');
    assert.deepEqual(warnings, [], 'the late send is dropped without a warning');
  } finally {
    await app.close();
  }
});
