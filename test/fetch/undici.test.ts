import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { Agent, type Dispatcher, request, fetch as undiciFetch } from 'undici';
import { type ClientOptions, RateLimitedError, rateLimitInterceptor } from '../../src/fetch/index.ts';
import { concurrency, fixedWindow, partitioned, tokenBucket } from '../../src/index.ts';
import { handClock, type Respond, startServer, type TestServer } from './server.ts';

let a: TestServer;
const agents: Agent[] = [];
before(async () => {
  a = await startServer();
});
after(async () => {
  await Promise.all(agents.map((agent) => agent.close()));
  await a.close();
});

function dispatcher(options: ClientOptions) {
  const agent = new Agent();
  agents.push(agent);
  const interceptor = rateLimitInterceptor(options);
  return { agent: agent.compose(interceptor) as Dispatcher, interceptor };
}

const ok: Respond = (_req, res) => res.end('ok');
const hourly = (permitLimit: number) => fixedWindow({ permitLimit, window: '1h' });

test('the quota holds through request() and undici fetch: local 429s never reach the server', async () => {
  a.respond = ok;
  const { agent, interceptor } = dispatcher({ limiter: hourly(2), onLimited: 'respond' });
  const start = a.hits.length;
  const answers = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const { statusCode, headers, body } = await request(a.url(), { dispatcher: agent });
      await body.text();
      return { statusCode, local: headers['floodgate-local'], retryAfter: headers['retry-after'] };
    }),
  );
  const viaFetch = await undiciFetch(a.url(), { dispatcher: agent });
  assert.equal(viaFetch.status, 429);
  assert.equal(viaFetch.headers.get('floodgate-local'), 'limit');
  await viaFetch.text();
  assert.equal(a.hits.length - start, 2);
  const local = answers.filter((x) => x.statusCode === 429);
  assert.equal(local.length, 2);
  assert.ok(local.every((x) => x.local === 'limit' && Number(x.retryAfter) >= 1));
  assert.deepEqual(interceptor.statistics, {
    sent: 2,
    limited: 3,
    paused: 0,
    throttled: 0,
    retries: 0,
    budgetExhausted: 0,
  });
});

test("'throw': request() rejects with a RateLimitedError", async () => {
  a.respond = ok;
  const { agent } = dispatcher({ limiter: hourly(1), onLimited: 'throw' });
  await (await request(a.url(), { dispatcher: agent })).body.text();
  await assert.rejects(request(a.url(), { dispatcher: agent }), RateLimitedError);
});

test('a 429 with Retry-After pauses the origin', async () => {
  let first = true;
  a.respond = (_req, res) => {
    if (!first) return res.end('ok');
    first = false;
    res.writeHead(429, { 'retry-after': '5' }).end('no');
  };
  const clock = handClock();
  const { agent, interceptor } = dispatcher({
    limiter: tokenBucket({ tokenLimit: 100, tokensPerPeriod: 100, period: '1s' }),
    onLimited: 'throw',
    clock,
    pause: { jitter: 0 },
  });
  const start = a.hits.length;
  const refused = await request(a.url(), { dispatcher: agent });
  assert.equal(refused.statusCode, 429);
  await refused.body.text();
  assert.equal(interceptor.pausedFor(a.origin), 5000);
  const error = await request(a.url(), { dispatcher: agent }).then(
    () => assert.fail('should be paused'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof RateLimitedError && error.reason === 'paused');
  clock.advance(5000);
  assert.equal((await request(a.url(), { dispatcher: agent })).statusCode, 200);
  assert.equal(a.hits.length - start, 2);
});

test('a concurrency permit is held until the body ends; a queued request aborts through its signal', async () => {
  // Bigger than the socket and stream buffers: undici ends the response only once the caller reads it.
  const big = Buffer.alloc(4 * 1024 * 1024, 120);
  a.respond = (_req, res) => res.end(big);
  const limiter = partitioned<string>({
    key: (k) => k,
    limiter: concurrency({ permitLimit: 1, queueLimit: 5 }),
  });
  const { agent } = dispatcher({ limiter });
  const start = a.hits.length;
  const first = await request(a.url(), { dispatcher: agent });
  const controller = new AbortController();
  const aborted = request(a.url(), { dispatcher: agent, signal: controller.signal });
  const second = request(a.url(), { dispatcher: agent });
  for (let i = 0; i < 5; i++) await tick();
  assert.equal(limiter.statistics(a.origin).queued, 2);
  controller.abort(new Error('gone'));
  await assert.rejects(aborted, /gone/);
  assert.equal(a.hits.length - start, 1);
  assert.equal((await first.body.text()).length, big.length);
  await (await second).body.text();
  assert.equal(a.hits.length - start, 2);
  assert.equal(limiter.statistics(a.origin).available, 1);
});

test('retry: the paused answer is read and dropped, and the call sent again after the pause (1 s)', async () => {
  let first = true;
  a.respond = (_req, res) => {
    if (!first) return res.end('second');
    first = false;
    res.writeHead(503, { 'retry-after': '1' }).end('busy');
  };
  const { agent } = dispatcher({ limiter: hourly(10), retry: 1, pause: { jitter: 0 } });
  const start = a.hits.length;
  const { statusCode, body } = await request(a.url(), { dispatcher: agent });
  assert.equal(statusCode, 200);
  assert.equal(await body.text(), 'second');
  const hits = a.hits.slice(start);
  assert.equal(hits.length, 2);
  assert.ok(hits[1].at - hits[0].at >= 900, `retried after ${hits[1].at - hits[0].at} ms`);
});
