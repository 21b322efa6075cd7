import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { RateLimitedError, rateLimitedFetch } from '../../src/fetch/index.ts';
import { concurrency, partitioned } from '../../src/index.ts';
import { startServer, type TestServer } from './server.ts';

let a: TestServer;
before(async () => {
  a = await startServer((req, res) => {
    if (req.url === '/empty') res.writeHead(204).end();
    else res.end('x'.repeat(100_000));
  });
});
after(() => a.close());

/** A concurrency limiter we can look into: one permit per origin, a queue of `queueLimit`. */
function setup(queueLimit = 5) {
  const limiter = partitioned<string>({
    key: (k) => k,
    limiter: concurrency({ permitLimit: 1, queueLimit }),
  });
  const api = rateLimitedFetch({ limiter });
  const stats = () => limiter.statistics(a.origin);
  return { api, stats };
}

/** Lets the client reach the limiter's queue (a few event-loop turns). */
async function settle() {
  for (let i = 0; i < 5; i++) await tick();
}

test('the permit is held until the body is read to the end', async () => {
  const { api, stats } = setup();
  const start = a.hits.length;
  const first = await api(a.url('/one'));
  assert.equal(first.url, a.url('/one'), 'url survives the body wrapping');
  const second = api(a.url('/two'));
  await settle();
  assert.equal(stats().queued, 1, 'the second call waits');
  assert.equal(a.hits.length - start, 1);
  assert.equal((await first.text()).length, 100_000);
  const response = await second;
  assert.equal(a.hits.length - start, 2);
  await response.arrayBuffer();
  assert.equal(stats().available, 1, 'released after the second body too');
});

test('cancelling the body releases the permit', async () => {
  const { api, stats } = setup();
  const first = await api(a.url());
  const second = api(a.url());
  await settle();
  assert.equal(stats().queued, 1);
  await first.body?.cancel();
  await (await second).body?.cancel();
  assert.equal(stats().available, 1);
});

test('a queued call aborted through its signal leaves the queue and never reaches the server', async () => {
  const { api, stats } = setup();
  const start = a.hits.length;
  const first = await api(a.url());
  const controller = new AbortController();
  const second = api(a.url('/aborted'), { signal: controller.signal });
  await settle();
  assert.equal(stats().queued, 1);
  controller.abort(new Error('changed my mind'));
  await assert.rejects(second, /changed my mind/);
  assert.equal(stats().queued, 0);
  await first.text();
  assert.equal(a.hits.length - start, 1);
  assert.equal(stats().available, 1);
});

test('a full queue refuses at once with a typed error', async () => {
  const { api } = setup(1);
  const first = await api(a.url());
  const second = api(a.url());
  await settle();
  const error = await api(a.url()).then(
    () => assert.fail('should be refused'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof RateLimitedError);
  assert.equal(error.reason, 'queue-full');
  await first.text();
  await (await second).text();
});

test('a response without a body, and a network error, release at once', async () => {
  const { api, stats } = setup();
  const empty = await api(a.url('/empty'));
  assert.equal(empty.status, 204);
  assert.equal(stats().available, 1);

  const limiter = concurrency({ permitLimit: 1, queueLimit: 1 });
  const failing = rateLimitedFetch({
    limiter,
    fetch: () => Promise.reject(new TypeError('fetch failed')),
  });
  await assert.rejects(failing(a.url()), /fetch failed/);
  await assert.rejects(
    failing(a.url()),
    /fetch failed/,
    'the permit came back: the second call is not stuck',
  );
});
