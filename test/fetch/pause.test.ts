import assert from 'node:assert/strict';
import type * as http from 'node:http';
import { after, before, beforeEach, describe, test } from 'node:test';
import { RateLimitedError, type RateLimitedFetchOptions, rateLimitedFetch } from '../../src/fetch/index.ts';
import { concurrency, tokenBucket } from '../../src/index.ts';
import { handClock, type Respond, startServer, type TestServer } from './server.ts';

let a: TestServer;
let b: TestServer;
before(async () => {
  a = await startServer();
  b = await startServer();
});
after(async () => {
  await a.close();
  await b.close();
});
beforeEach(() => {
  a.respond = ok;
});

const ok: Respond = (_req, res) => res.end('ok');
/** Answers the first request with `status` and `headers`, every later one with 200. */
function refuseOnce(status: number, headers: http.OutgoingHttpHeaders): Respond {
  let done = false;
  return (_req, res) => {
    if (done) return res.end('ok');
    done = true;
    res.writeHead(status, headers).end('slow down');
  };
}
const roomy = () => tokenBucket({ tokenLimit: 1000, tokensPerPeriod: 1000, period: '1s' });

/** A client on a hand clock, without jitter, that throws when paused. */
function client(extra: Partial<RateLimitedFetchOptions> = {}) {
  const clock = handClock();
  const api = rateLimitedFetch({
    limiter: roomy(),
    onLimited: 'throw',
    clock,
    pause: { jitter: 0 },
    ...extra,
  });
  return { api, clock };
}

async function refused(promise: Promise<Response>): Promise<RateLimitedError> {
  const error = await promise.then(
    () => assert.fail('should be refused'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof RateLimitedError, String(error));
  return error;
}

describe('server-driven pauses', () => {
  test('429 with Retry-After in seconds pauses that origin, and only it, until the time given', async () => {
    const { api, clock } = client();
    a.respond = refuseOnce(429, { 'retry-after': '5' });
    const start = a.hits.length;
    const first = await api(a.url());
    assert.equal(first.status, 429, "the server's own answer is returned");
    await first.text();
    assert.equal(api.pausedFor(a.origin), 5000);
    const error = await refused(api(a.url()));
    assert.equal(error.reason, 'paused');
    assert.equal(error.retryAfterMs, 5000);
    assert.equal((await api(b.url())).status, 200, 'another origin is not paused');
    clock.advance(4999);
    await refused(api(a.url()));
    assert.equal(a.hits.length - start, 1, 'nothing left during the pause');
    clock.advance(1);
    assert.equal((await api(a.url())).status, 200);
    assert.equal(a.hits.length - start, 2);
    assert.deepEqual(api.statistics, {
      sent: 3,
      limited: 0,
      paused: 2,
      throttled: 0,
      retries: 0,
      budgetExhausted: 0,
    });
  });

  test("Retry-After as an HTTP-date, measured against the response's Date", async () => {
    const { api } = client();
    a.respond = refuseOnce(503, {
      date: 'Sun, 29 Nov 2026 12:00:00 GMT',
      'retry-after': 'Sun, 29 Nov 2026 12:00:07 GMT',
    });
    await (await api(a.url())).text();
    assert.equal(api.pausedFor(a.origin), 7000);
  });

  test('the draft-10 RateLimit field: the longest t of the exhausted policies', async () => {
    const { api } = client();
    a.respond = refuseOnce(429, { ratelimit: '"burst";r=3;t=1, "api";r=0;t=12' });
    await (await api(a.url())).text();
    assert.equal(api.pausedFor(a.origin), 12_000);
  });

  test('malformed fields, and statuses that do not pause, are ignored', async () => {
    const { api } = client();
    const answers: Array<[number, http.OutgoingHttpHeaders]> = [
      [429, { 'retry-after': 'soon' }],
      [429, { 'retry-after': '1.5' }],
      [503, { ratelimit: '"api";r=0;t=12.5' }],
      [429, { ratelimit: '"api";r=0;t=12,' }],
      [429, { 'retry-after': '-3', ratelimit: 'api;r=0;t=x' }],
      [200, { 'retry-after': '10' }],
      [500, { 'retry-after': '10' }],
    ];
    for (const [status, headers] of answers) {
      a.respond = refuseOnce(status, headers);
      await (await api(a.url())).text();
      assert.equal(api.pausedFor(a.origin), 0, JSON.stringify(headers));
    }
  });

  test('a cap, and jitter that only ever adds', async () => {
    const { api } = client({ pause: { max: '1m', jitter: 0.5 }, random: () => 0.5 });
    a.respond = refuseOnce(429, { 'retry-after': '100000' });
    await (await api(a.url())).text();
    assert.equal(api.pausedFor(a.origin), 75_000);
  });

  test("'respond' during a pause: a local 429 with Retry-After", async () => {
    const { api } = client({ onLimited: 'respond' });
    a.respond = refuseOnce(429, { 'retry-after': '5' });
    await (await api(a.url())).text();
    const start = a.hits.length;
    const local = await api(a.url());
    assert.equal(local.status, 429);
    assert.equal(local.headers.get('floodgate-local'), 'paused');
    assert.equal(local.headers.get('retry-after'), '5');
    assert.equal(a.hits.length, start);
  });

  test('pause: false ignores the server', async () => {
    const { api } = client({ pause: false });
    a.respond = refuseOnce(429, { 'retry-after': '5' });
    await (await api(a.url())).text();
    assert.equal(api.pausedFor(a.origin), 0);
  });
});

describe('waiting out a pause (real time, 1 s)', () => {
  test("'wait': a call queued behind the refused one leaves no earlier than the time given; aborts end waits", async () => {
    a.respond = refuseOnce(429, { 'retry-after': '1' });
    const api = rateLimitedFetch({
      limiter: concurrency({ permitLimit: 1, queueLimit: 5 }),
      pause: { jitter: 0 },
    });
    const start = a.hits.length;
    const first = api(a.url('/first')).then((r) => r.text());
    // Queued behind the first: admitted once its body is read, then held by the pause.
    const second = api(a.url('/second')).then((r) => r.text());
    await first;
    const aborted = await api(a.url('/aborted'), { signal: AbortSignal.timeout(50) }).then(
      () => assert.fail('should abort'),
      (e: Error) => e,
    );
    assert.equal(aborted.name, 'TimeoutError');
    assert.equal(await second, 'ok');
    const hits = a.hits.slice(start);
    assert.deepEqual(
      hits.map((h) => h.path),
      ['/first', '/second'],
    );
    assert.ok(hits[1].at - hits[0].at >= 900, `second left ${hits[1].at - hits[0].at} ms after the first`);
    assert.equal(api.statistics.paused, 2);
  });

  test('retry: an idempotent call is retried after the pause; a POST is not', async () => {
    const api = rateLimitedFetch({ limiter: roomy(), retry: 1, pause: { jitter: 0 } });
    a.respond = refuseOnce(429, { 'retry-after': '1' });
    let start = a.hits.length;
    const response = await api(a.url('/get'));
    assert.equal(response.status, 200);
    assert.equal(await response.text(), 'ok');
    let hits = a.hits.slice(start);
    assert.equal(hits.length, 2);
    assert.ok(hits[1].at - hits[0].at >= 900, `retried after ${hits[1].at - hits[0].at} ms`);

    a.respond = refuseOnce(429, { 'retry-after': '1' });
    start = a.hits.length;
    const post = await api(a.url('/post'), { method: 'POST', body: 'x' });
    assert.equal(post.status, 429);
    await post.text();
    hits = a.hits.slice(start);
    assert.equal(hits.length, 1);
  });
});
