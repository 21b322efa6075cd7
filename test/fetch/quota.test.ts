import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RateLimitedError, rateLimitedFetch } from '../../src/fetch/index.ts';
import { chain, concurrency, fixedWindow, partitioned, tokenBucket } from '../../src/index.ts';
import { startServer, type TestServer } from './server.ts';

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

const hourly = (permitLimit: number) => fixedWindow({ permitLimit, window: '1h' });

describe('the local quota holds, counted on the server', () => {
  test("'respond': only the allowed calls reach the server; the rest get a local 429", async () => {
    const start = a.hits.length;
    const api = rateLimitedFetch({ limiter: hourly(3), onLimited: 'respond' });
    const asFetch: typeof fetch = api; // the signature of fetch, checked by tsc
    assert.equal(asFetch, api);
    const responses = await Promise.all(Array.from({ length: 10 }, (_, i) => api(a.url(`/r${i}`))));
    assert.equal(a.hits.length - start, 3);
    const local = responses.filter((r) => r.status === 429);
    assert.equal(local.length, 7);
    for (const r of local) {
      assert.equal(r.headers.get('floodgate-local'), 'limit');
      assert.ok(Number(r.headers.get('retry-after')) >= 1);
    }
    await Promise.all(responses.map((r) => r.text()));
    assert.deepEqual(api.statistics, {
      sent: 3,
      limited: 7,
      paused: 0,
      throttled: 0,
      retries: 0,
      budgetExhausted: 0,
    });
  });

  test("'throw': a typed error, and nothing reaches the server", async () => {
    const start = a.hits.length;
    const api = rateLimitedFetch({ limiter: hourly(1), onLimited: 'throw' });
    await (await api(a.url())).text();
    const error = await api(a.url()).then(
      () => assert.fail('should be refused'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof RateLimitedError);
    assert.equal(error.reason, 'limit');
    assert.equal(error.key, a.origin);
    assert.ok(error.retryAfterMs !== undefined && error.retryAfterMs > 0);
    assert.equal(a.hits.length - start, 1);
  });

  test("'wait' with a queue: every call is sent, no faster than the bucket refills", async () => {
    const start = a.hits.length;
    // The bucket's clock is performance.now(), as the server's stamps are: the bucket starts at `created`.
    const created = performance.now();
    const api = rateLimitedFetch({
      limiter: tokenBucket({ tokenLimit: 2, tokensPerPeriod: 2, period: 200, queueLimit: 10 }),
    });
    const responses = await Promise.all(Array.from({ length: 6 }, () => api(a.url())));
    await Promise.all(responses.map((r) => r.text()));
    const hits = a.hits.slice(start);
    assert.equal(hits.length, 6);
    // Two at once, two a period later, two two periods later: the 3rd and the 5th calls cannot have been sent
    // before their tokens existed (a causal bound, not a timing guess: the first call's connect may be slow).
    assert.ok(hits[2].at - created >= 200, `3rd call sent ${hits[2].at - created} ms after the bucket began`);
    assert.ok(hits[4].at - created >= 400, `5th call sent ${hits[4].at - created} ms after the bucket began`);
  });

  test("'wait' without a queue sleeps until the lease's retryAfterMs, then sends", async () => {
    const start = a.hits.length;
    const created = performance.now();
    const api = rateLimitedFetch({ limiter: fixedWindow({ permitLimit: 2, window: 300 }) });
    const responses = await Promise.all(Array.from({ length: 3 }, () => api(a.url())));
    await Promise.all(responses.map((r) => r.text()));
    const hits = a.hits.slice(start);
    assert.equal(hits.length, 3);
    // The third call waits for the next window, which begins 300 ms after the limiter (a causal bound).
    assert.ok(hits[2].at - created >= 300, `3rd call sent ${hits[2].at - created} ms after the window began`);
  });
});

test("'wait' keeps the queue's bound: a call that cannot queue is refused", async () => {
  const start = a.hits.length;
  const api = rateLimitedFetch({ limiter: fixedWindow({ permitLimit: 1, window: '1h', queueLimit: 1 }) });
  await (await api(a.url())).text();
  const controller = new AbortController();
  const queued = api(a.url(), { signal: controller.signal });
  const error = await api(a.url()).then(
    () => assert.fail('should be refused'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof RateLimitedError);
  assert.equal(error.reason, 'queue-full');
  controller.abort();
  await assert.rejects(queued, { name: 'AbortError' });
  assert.equal(a.hits.length - start, 1);
});

describe('partitions', () => {
  test('one budget per origin by default: a spent API does not block another', async () => {
    const [startA, startB] = [a.hits.length, b.hits.length];
    const api = rateLimitedFetch({ limiter: hourly(2), onLimited: 'respond' });
    const calls = [a, a, a, a, b, b, b, b].map((s) => api(s.url()).then((r) => r.text()));
    await Promise.all(calls);
    assert.equal(a.hits.length - startA, 2);
    assert.equal(b.hits.length - startB, 2);
  });

  test('a custom key shares one budget between origins', async () => {
    const [startA, startB] = [a.hits.length, b.hits.length];
    const api = rateLimitedFetch({ limiter: hourly(2), key: () => 'all', onLimited: 'respond' });
    await Promise.all([a, b, a, b].map((s) => api(s.url()).then((r) => r.text())));
    assert.equal(a.hits.length - startA + (b.hits.length - startB), 2);
  });

  test('an already partitioned limiter receives the key: tiers per origin', async () => {
    const [startA, startB] = [a.hits.length, b.hits.length];
    const limiter = partitioned<string>({
      key: (origin) => origin,
      limiter: (origin) => (origin === a.origin ? hourly(1) : hourly(3)),
    });
    const api = rateLimitedFetch({ limiter, onLimited: 'respond' });
    await Promise.all([a, a, a, b, b, b, b].map((s) => api(s.url()).then((r) => r.text())));
    assert.equal(a.hits.length - startA, 1);
    assert.equal(b.hits.length - startB, 3);
  });
});

test('a chain: a per-origin budget under a global one, all-or-nothing', async () => {
  const [startA, startB] = [a.hits.length, b.hits.length];
  const perOrigin = partitioned<string>({ key: (origin) => origin, limiter: hourly(2) });
  const global = hourly(3);
  const api = rateLimitedFetch({ limiter: chain(perOrigin, global), onLimited: 'respond' });
  for (const s of [a, a, a, b, b, b]) await (await api(s.url())).text();
  assert.equal(a.hits.length - startA, 2, 'the third call to a is refused by its own budget');
  assert.equal(b.hits.length - startB, 1, 'b gets what is left of the global budget');
  assert.equal(global.statistics().available, 0);
});

describe('options are checked at construction', () => {
  const cases: Array<[string, () => unknown, RegExp]> = [
    ['limiter', () => rateLimitedFetch({ limiter: {} as never }), /limiter must be a limiter.*got an object/],
    [
      'onLimited',
      () => rateLimitedFetch({ limiter: hourly(1), onLimited: 'drop' as never }),
      /onLimited.*"drop"/,
    ],
    [
      'wait without a queue on concurrency',
      () => rateLimitedFetch({ limiter: concurrency({ permitLimit: 1 }) }),
      /'wait' needs a queue/,
    ],
    [
      'pause.jitter',
      () => rateLimitedFetch({ limiter: hourly(1), pause: { jitter: 2 } }),
      /pause\.jitter.*got 2/,
    ],
    [
      'pause.max',
      () => rateLimitedFetch({ limiter: hourly(1), pause: { max: '1y' as never } }),
      /pause\.max.*"1y"/,
    ],
    ['retry', () => rateLimitedFetch({ limiter: hourly(1), retry: 11 }), /retry\.attempts.*got 11/],
    [
      'fetch',
      () => rateLimitedFetch({ limiter: hourly(1), fetch: 'x' as never }),
      /fetch must be a function/,
    ],
    ['key', () => rateLimitedFetch({ limiter: hourly(1), key: 'origin' as never }), /key must be a function/],
    [
      'an unknown option, with the closest known name',
      () => rateLimitedFetch({ limiter: hourly(1), retries: 2 } as never),
      /unknown option "retries"; did you mean "retry"\?/,
    ],
    [
      'an unknown nested option',
      () => rateLimitedFetch({ limiter: hourly(1), adaptive: { histroyMs: 1000 } as never }),
      /adaptive: unknown option "histroyMs"; did you mean "historyMs"\?/,
    ],
    [
      'retry.backoff unknown',
      () => rateLimitedFetch({ limiter: hourly(1), retry: { attempts: 1, backoff: { base: 1 } as never } }),
      /retry\.backoff: unknown option "base"; did you mean "baseMs"\?/,
    ],
    [
      'pause unknown',
      () => rateLimitedFetch({ limiter: hourly(1), pause: { maxMs: 1 } as never }),
      /pause: unknown option "maxMs"; did you mean "max"\?/,
    ],
    [
      'adaptive.k',
      () => rateLimitedFetch({ limiter: hourly(1), adaptive: { k: 0.5 } }),
      /adaptive\.k.*got 0\.5/,
    ],
    [
      'adaptive.historyMs',
      () => rateLimitedFetch({ limiter: hourly(1), adaptive: { historyMs: '10s' as never } }),
      /adaptive\.historyMs must be a whole number; got "10s"/,
    ],
    [
      'adaptive.maxRejection',
      () => rateLimitedFetch({ limiter: hourly(1), adaptive: { maxRejection: 0 } }),
      /adaptive\.maxRejection.*got 0/,
    ],
    [
      'adaptive.isFailure',
      () => rateLimitedFetch({ limiter: hourly(1), adaptive: { isFailure: 500 as never } }),
      /adaptive\.isFailure must be a function; got 500/,
    ],
    [
      'adaptive itself',
      () => rateLimitedFetch({ limiter: hourly(1), adaptive: 'on' as never }),
      /adaptive must be an object; got "on"/,
    ],
    [
      'retry.budget',
      () => rateLimitedFetch({ limiter: hourly(1), retry: { attempts: 1, budget: -0.1 } }),
      /retry\.budget.*got -0\.1/,
    ],
    [
      'retry.backoff.maxMs below baseMs',
      () =>
        rateLimitedFetch({
          limiter: hourly(1),
          retry: { attempts: 1, backoff: { baseMs: 500, maxMs: 100 } },
        }),
      /retry\.backoff\.maxMs must be a whole number ≥ 500; got 100/,
    ],
    [
      'retry.minRetries',
      () => rateLimitedFetch({ limiter: hourly(1), retry: { attempts: 1, minRetries: 1.5 } }),
      /retry\.minRetries.*got 1\.5/,
    ],
  ];
  for (const [name, make, message] of cases) {
    test(name, () => assert.throws(make, message));
  }
});
