import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import {
  defaultIsFailure,
  RateLimitedError,
  type RateLimitedFetchOptions,
  rateLimitedFetch,
  ThrottledError,
} from '../../src/fetch/index.ts';
import { fixedWindow, partitioned, tokenBucket } from '../../src/index.ts';
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

/** A server that fails the share of requests the test sets, spread evenly (every n-th), with `status`. */
function failing(server: TestServer, status = 500) {
  const state = { share: 1 };
  let n = 0;
  const failures = (count: number) => Math.floor(count * state.share + 1e-9);
  server.respond = ((_req, res) => {
    n++;
    if (failures(n) > failures(n - 1)) res.writeHead(status).end('down');
    else res.end('ok');
  }) as Respond;
  return state;
}

const roomy = () => tokenBucket({ tokenLimit: 1e6, tokensPerPeriod: 1e6, period: '1s' });

/** An adaptive client on a hand clock; `draw` is what `random()` returns. */
function client(extra: Partial<RateLimitedFetchOptions> = {}, adaptive = {}) {
  const clock = handClock();
  const state = { draw: 0 };
  const api = rateLimitedFetch({
    limiter: roomy(),
    onLimited: 'throw',
    clock,
    random: () => state.draw,
    adaptive: { minRequests: 0, historyMs: 10_000, ...adaptive },
    ...extra,
  });
  return { api, clock, state };
}

/** Calls once: the status, or the error's constructor name. */
async function call(api: (url: string) => Promise<Response>, url: string): Promise<number | string> {
  try {
    const response = await api(url);
    await response.text();
    return response.status;
  } catch (error) {
    return (error as Error).name;
  }
}

beforeEach(() => {
  a.respond = (_req, res) => res.end('ok');
});

describe('adaptive throttling (hand clock, injected random)', () => {
  test('while the server fails, calls are rejected locally with a typed error, never reaching it', async () => {
    failing(a);
    const { api } = client();
    const start = a.hits.length;
    assert.equal(await call(api, a.url()), 500, 'the first failure goes through');
    // requests 1, accepts 0: p = 1/2; a draw of 0 is below it
    assert.equal(api.rejectionProbability(a.origin), 1 / 2);
    const error = await api(a.url()).then(
      () => assert.fail('should be throttled'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ThrottledError);
    assert.ok(error instanceof RateLimitedError, 'one catch handles every local refusal');
    assert.equal(error.reason, 'throttled');
    assert.equal(error.key, a.origin);
    assert.equal(error.probability, 1 / 2);
    assert.equal(error.code, 'ERR_FLOODGATE_RATE_LIMITED');
    assert.equal(a.hits.length - start, 1, 'no socket was used');
    assert.equal(api.statistics.throttled, 1);
    assert.equal(api.statistics.sent, 1);
    assert.equal(api.rejectionProbability(b.origin), 0, 'another origin is not touched');
  });

  test('a throttled call takes no permit from the limiter', async () => {
    failing(a);
    const limiter = partitioned<string>({
      key: (k) => k,
      limiter: fixedWindow({ permitLimit: 2, window: '1h' }),
    });
    const { api } = client({ limiter });
    await call(api, a.url());
    for (let i = 0; i < 5; i++) assert.equal(await call(api, a.url()), 'ThrottledError');
    assert.equal(limiter.statistics(a.origin).available, 1, 'only the call that was sent took one');
  });

  test("'respond': a local 503 marked floodgate-local: throttled", async () => {
    failing(a);
    const { api } = client({ onLimited: 'respond' });
    await call(api, a.url());
    const start = a.hits.length;
    const local = await api(a.url());
    assert.equal(local.status, 503);
    assert.equal(local.headers.get('floodgate-local'), 'throttled');
    assert.equal(local.headers.get('retry-after'), null, 'no time is known');
    await local.text();
    assert.equal(a.hits.length, start);
  });

  test("'wait' does not wait when throttled: the call fails fast", async () => {
    failing(a);
    const { api } = client({ onLimited: 'wait' });
    await call(api, a.url());
    assert.equal(await call(api, a.url()), 'ThrottledError');
  });

  test('a draw at or above the probability goes; accepts bring the probability down, then to 0', async () => {
    const server = failing(a);
    const { api, state } = client({}, { maxRejection: 0.9 });
    for (let i = 0; i < 20; i++) await call(api, a.url());
    assert.equal(api.rejectionProbability(a.origin), 0.9, 'capped: 1 call in 10 still probes');
    server.share = 0; // the server is back
    state.draw = 0.95;
    const start = a.hits.length;
    const seen: number[] = [];
    for (let i = 0; i < 25; i++) {
      assert.equal(await call(api, a.url()), 200);
      seen.push(api.rejectionProbability(a.origin));
    }
    assert.equal(a.hits.length - start, 25);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] <= seen[i - 1]);
    assert.equal(seen.at(-1), 0);
    state.draw = 0;
    assert.equal(await call(api, a.url()), 200, 'nothing is rejected any more');
  });

  test('recovery as the history slides: an outage older than historyMs is forgotten', async () => {
    const server = failing(a);
    const { api, clock } = client();
    for (let i = 0; i < 20; i++) await call(api, a.url());
    assert.equal(api.rejectionProbability(a.origin), 0.95, 'at the default cap');
    server.share = 0;
    clock.advance(5_000);
    assert.equal(api.rejectionProbability(a.origin), 0.95, 'half a history later it still counts');
    clock.advance(5_000);
    assert.equal(api.rejectionProbability(a.origin), 0);
    assert.equal(await call(api, a.url()), 200);
  });

  test('with 10 % of calls failing nothing is throttled (k = 2 tolerates up to half)', async () => {
    failing(a).share = 0.1;
    const { api } = client();
    const start = a.hits.length;
    const statuses = [];
    for (let i = 0; i < 100; i++) statuses.push(await call(api, a.url()));
    assert.equal(a.hits.length - start, 100);
    assert.equal(statuses.filter((s) => s === 500).length, 10);
    assert.equal(api.statistics.throttled, 0);
  });

  test('4xx answers, 501 and 505 are not failures; isFailure can say otherwise', async () => {
    for (const status of [404, 429, 501, 505]) {
      failing(a, status);
      const { api } = client();
      for (let i = 0; i < 10; i++) assert.equal(await call(api, a.url()), status);
      assert.equal(api.rejectionProbability(a.origin), 0, String(status));
    }
    failing(a, 429);
    const { api } = client(
      {},
      { isFailure: (o: { status?: number }) => o.status === 429 || defaultIsFailure(o as never) },
    );
    for (let i = 0; i < 3; i++) await call(api, a.url());
    assert.ok(api.rejectionProbability(a.origin) > 0);
  });

  test('network errors and timeouts are failures; a caller abort is not recorded', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const clock = handClock();
    let next: 'refuse' | 'timeout' | 'abort' = 'refuse';
    const api = rateLimitedFetch({
      limiter: roomy(),
      clock,
      random: () => 0.999,
      adaptive: { minRequests: 0 },
      fetch: async (_input, init) => {
        if (next === 'refuse') throw new TypeError('fetch failed', { cause: refused });
        if (next === 'timeout') throw new DOMException('The operation timed out.', 'TimeoutError');
        throw init?.signal?.reason;
      },
    });
    await assert.rejects(api(a.url()), /fetch failed/);
    assert.equal(api.rejectionProbability(a.origin), 1 / 2);
    next = 'timeout';
    await assert.rejects(api(a.url()), { name: 'TimeoutError' });
    assert.equal(api.rejectionProbability(a.origin), 2 / 3);
    next = 'abort';
    const controller = new AbortController();
    controller.abort(new Error('not needed after all'));
    await assert.rejects(api(a.url(), { signal: controller.signal }), /not needed/);
    assert.equal(api.rejectionProbability(a.origin), 2 / 3, 'unchanged');
  });

  test('the key function partitions the history: one key, one history for every origin', async () => {
    failing(a);
    b.respond = (_req, res) => res.end('ok');
    const { api } = client({ key: () => 'all' });
    await call(api, a.url());
    assert.equal(await call(api, b.url()), 'ThrottledError', 'b shares the history a spoiled');
    assert.equal(api.rejectionProbability('all'), 2 / 3);
  });
});
