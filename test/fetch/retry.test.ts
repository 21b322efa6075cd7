import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { Gate } from '../../src/fetch/gate.ts';
import { type RateLimitedFetchOptions, rateLimitedFetch } from '../../src/fetch/index.ts';
import { clientConfig } from '../../src/fetch/options.ts';
import { tokenBucket } from '../../src/index.ts';
import { handClock, type Respond, startServer, type TestServer } from './server.ts';

let a: TestServer;
before(async () => {
  a = await startServer();
});
after(() => a.close());
beforeEach(() => {
  a.respond = ok;
});

const ok: Respond = (_req, res) => res.end('ok');
const down: Respond = (_req, res) => res.writeHead(500).end('down');
/** Fails the first `n` requests with `fail`, then answers 200. */
function failFirst(n: number, fail: Respond = down): Respond {
  let seen = 0;
  return (req, res, hit) => (seen++ < n ? fail(req, res, hit) : ok(req, res, hit));
}
const roomy = () => tokenBucket({ tokenLimit: 1e6, tokensPerPeriod: 1e6, period: '1s' });

/** A retrying client on a hand clock; random() is 0, so every backoff is 0 ms. */
function client(retry: RateLimitedFetchOptions['retry'], extra: Partial<RateLimitedFetchOptions> = {}) {
  const clock = handClock();
  return rateLimitedFetch({ limiter: roomy(), clock, random: () => 0, retry, ...extra });
}

async function status(promise: Promise<Response>): Promise<number> {
  const response = await promise;
  await response.text();
  return response.status;
}

/** Resolves once `check` holds, looking after each turn of the event loop (no timers, no durations). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await tick();
}

describe('retries over a real server', () => {
  test('a 5xx and a network error are retried; the caller sees the answer that worked', async () => {
    const api = client(3);
    a.respond = failFirst(2);
    let start = a.hits.length;
    assert.equal(await status(api(a.url())), 200);
    assert.equal(a.hits.length - start, 3);
    assert.equal(api.statistics.retries, 2);
    // The socket is closed with no answer: fetch fails with a network error.
    a.respond = failFirst(1, (_req, res) => res.socket?.destroy());
    start = a.hits.length;
    assert.equal(await status(api(a.url())), 200);
    assert.equal(a.hits.length - start, 2);
  });

  test('a per-attempt timeout through the fetch option: a hung attempt times out and is retried', async () => {
    const hung: Array<() => void> = [];
    let first = true;
    let attempts = 0;
    a.respond = (_req, res) => {
      if (!first) return res.end('ok');
      first = false;
      hung.push(() => res.destroy()); // never answers; closed at the end of the test
    };
    const api = rateLimitedFetch({
      limiter: roomy(),
      random: () => 0,
      retry: 1,
      // Only the first attempt gets a short timeout, so that a loaded machine cannot time out the second.
      fetch: (input, init) => {
        const timeout = AbortSignal.timeout(attempts++ === 0 ? 100 : 60_000);
        return fetch(input, {
          ...init,
          signal: init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout,
        });
      },
    });
    const start = a.hits.length;
    assert.equal(await status(api(a.url())), 200);
    assert.equal(a.hits.length - start, 2);
    assert.equal(api.statistics.retries, 1);
    for (const close of hung) close();
  });

  test('attempts run out: the last answer is returned, and the last error thrown', async () => {
    const api = client({ attempts: 2, budget: false });
    a.respond = down;
    const start = a.hits.length;
    assert.equal(await status(api(a.url())), 500);
    assert.equal(a.hits.length - start, 3);
    a.respond = (_req, res) => res.socket?.destroy();
    await assert.rejects(api(a.url()), /fetch failed/);
  });

  test('non-idempotent methods are not retried unless listed; 4xx, 501 and 505 never', async () => {
    a.respond = down;
    let start = a.hits.length;
    assert.equal(await status(client(2)(a.url(), { method: 'POST', body: 'x' })), 500);
    assert.equal(a.hits.length - start, 1);
    start = a.hits.length;
    const posting = client({ attempts: 2, methods: ['POST'] });
    assert.equal(await status(posting(a.url(), { method: 'POST', body: 'x' })), 500);
    assert.equal(a.hits.length - start, 3, 'POST listed: retried');
    for (const code of [400, 404, 501, 505]) {
      a.respond = (_req, res) => res.writeHead(code).end();
      start = a.hits.length;
      assert.equal(await status(client(2)(a.url())), code);
      assert.equal(a.hits.length - start, 1, String(code));
    }
  });

  test('a body that cannot be sent again (a stream) is not retried', async () => {
    a.respond = down;
    const start = a.hits.length;
    const api = client({ attempts: 2, methods: ['PUT'] });
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('once'));
        controller.close();
      },
    });
    const init = { method: 'PUT', body, duplex: 'half' } as RequestInit;
    assert.equal(await status(api(a.url(), init)), 500);
    assert.equal(a.hits.length - start, 1);
  });

  test('the retry budget: over a window, retries stay under budget × calls (+ minRetries)', async () => {
    a.respond = down;
    const api = client({ attempts: 3, budget: 0.2, minRetries: 0 });
    const start = a.hits.length;
    for (let i = 0; i < 10; i++) assert.equal(await status(api(a.url())), 500);
    // Naive retries would send 40. Retry allowed while retries + 1 ≤ 0.2 × calls: at the 5th and 10th call.
    assert.equal(a.hits.length - start, 12);
    assert.equal(api.statistics.retries, 2);
    assert.equal(api.statistics.budgetExhausted, 10, 'every call that wanted a retry and got none');
  });

  test('minRetries lets a quiet client retry; the window slides on the injected clock', async () => {
    const clock = handClock();
    const api = rateLimitedFetch({
      limiter: roomy(),
      clock,
      random: () => 0,
      retry: { attempts: 1, budget: 0.2, minRetries: 1, windowMs: 1000 },
    });
    a.respond = failFirst(1);
    assert.equal(await status(api(a.url())), 200, 'the one retry of the window');
    a.respond = failFirst(1);
    assert.equal(await status(api(a.url())), 500, '1 + 0.2 × 2 < 2: no second retry');
    clock.advance(1000);
    a.respond = failFirst(1);
    assert.equal(await status(api(a.url())), 200, 'a window later, room again');
  });

  // A wait that ignored the signal would hang: the timeout turns that into a failure.
  test('an abort during the backoff ends the wait and sends nothing more', { timeout: 20_000 }, async () => {
    a.respond = down;
    const api = rateLimitedFetch({
      limiter: roomy(),
      random: () => 0.5,
      retry: { attempts: 3, backoff: { baseMs: 600_000, maxMs: 600_000 } },
    });
    const controller = new AbortController();
    const start = a.hits.length;
    const pending = api(a.url(), { signal: controller.signal });
    await until(() => api.statistics.retries === 1);
    controller.abort(new Error('gave up'));
    await assert.rejects(pending, /gave up/);
    assert.equal(a.hits.length - start, 1);
  });

  test('an abort during a Retry-After wait on a 5xx ends it too', { timeout: 20_000 }, async () => {
    a.respond = (_req, res) => res.writeHead(500, { 'retry-after': '600' }).end();
    const api = rateLimitedFetch({ limiter: roomy(), random: () => 0, retry: 1 });
    const controller = new AbortController();
    const start = a.hits.length;
    const pending = api(a.url(), { signal: controller.signal });
    await until(() => api.statistics.retries === 1);
    controller.abort(new Error('not waiting ten minutes'));
    await assert.rejects(pending, /ten minutes/);
    assert.equal(a.hits.length - start, 1);
  });

  test('during an outage, throttled retries stay home', async () => {
    a.respond = down;
    const api = client(
      { attempts: 3, budget: false },
      { adaptive: { minRequests: 0 }, onLimited: 'respond' },
    );
    const start = a.hits.length;
    assert.equal(await status(api(a.url())), 500, 'the first failure: p = 1/2 for its retry, which draws 0');
    assert.equal(a.hits.length - start, 1);
    assert.equal(api.statistics.throttled, 1);
    assert.equal(api.statistics.retries, 0);
  });
});

describe('the wait before a retry (decided by the gate)', () => {
  const url = 'http://x.test';
  function gate(random: number, extra = {}) {
    return new Gate(
      clientConfig('t', {
        limiter: roomy(),
        random: () => random,
        now: () => Date.UTC(2026, 0, 1),
        retry: { attempts: 5, budget: false, backoff: { baseMs: 100, maxMs: 1000 } },
        ...extra,
      }),
    );
  }
  const delay = (g: Gate, attempt: number, header?: (name: string) => string | null) => {
    const decision = g.retryAfter(url, url, 'GET', attempt, { status: 502 }, false, header);
    return decision.retry ? decision.delayMs : undefined;
  };

  test('capped exponential backoff with full jitter', () => {
    const half = gate(0.5);
    assert.deepEqual(
      [0, 1, 2, 3, 4].map((n) => delay(half, n)),
      [50, 100, 200, 400, 500],
    );
    assert.equal(delay(gate(0), 3), 0, 'full jitter reaches 0');
    assert.equal(delay(gate(0.5), 5), undefined, 'attempts spent');
  });

  test('Retry-After on a retried answer makes the wait longer, never shorter, capped at pause.max', () => {
    const g = gate(0.5, { pause: { max: '1m' } });
    const seconds = (s: string) => (name: string) => (name === 'retry-after' ? s : null);
    assert.equal(delay(g, 0, seconds('3')), 3000);
    assert.equal(delay(g, 4, seconds('0')), 500, 'the backoff when the server asks for less');
    assert.equal(delay(g, 0, seconds('3600')), 60_000);
    assert.equal(
      delay(g, 0, (n) => (n === 'retry-after' ? 'Thu, 01 Jan 2026 00:00:07 GMT' : null)),
      7000,
    );
    assert.equal(delay(g, 0, seconds('soon')), 50, 'malformed: ignored');
    assert.equal(delay(gate(0.5, { pause: false }), 0, seconds('3')), 50, 'pause: false ignores servers');
  });
});
