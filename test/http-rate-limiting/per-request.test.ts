import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientIp } from '../../src/http/client-ip.ts';
import { RateLimiting } from '../../src/http/rate-limiting/engine.ts';
import { chain, fixedWindow, partitioned, slidingWindow, tokenBucket } from '../../src/index.ts';
import { type AppSpec, adapters, get, withApp } from './apps.ts';

/** skip, refunds and the rate-limit info on the request, on every adapter over real sockets. */
const ip = clientIp();

const run = withApp;

function headerOf(req: unknown, name: string): string | undefined {
  const r = req as { headers?: Record<string, unknown>; req?: { header(n: string): string | undefined } };
  if (r.req !== undefined && typeof r.req.header === 'function') return r.req.header(name);
  const value = r.headers?.[name];
  return typeof value === 'string' ? value : undefined;
}

const clock = () => ({ now: () => 0 });

for (const name of Object.keys(adapters)) {
  describe(`${name}: per-request control`, () => {
    for (const kind of ['sync', 'async'] as const) {
      test(`skip on rateLimiting (${kind}): neither decided nor counted, no RateLimit fields`, async () => {
        const global = partitioned({
          key: ip,
          limiter: fixedWindow({ permitLimit: 1, window: '1m', clock: clock() }),
        });
        const verdict = (req: unknown) => headerOf(req, 'x-internal') === 'yes';
        const skip = kind === 'sync' ? verdict : async (req: unknown) => verdict(req);
        await run(name, { options: { global, skip }, routes: [{ path: '/a' }] }, async (base) => {
          for (let i = 0; i < 3; i++) {
            const skipped = await get(`${base}/a`, { 'x-internal': 'yes' });
            assert.equal(skipped.status, 200);
            assert.equal(skipped.headers.get('ratelimit'), null);
            assert.equal(skipped.headers.get('ratelimit-policy'), null);
          }
          assert.equal((await get(`${base}/a`)).status, 200, 'the skipped requests took nothing');
          assert.equal((await get(`${base}/a`)).status, 429);
        });
      });
    }

    test('skip on a policy: the request is limited by the global limiter alone', async () => {
      const global = partitioned({
        key: ip,
        limiter: fixedWindow({ permitLimit: 3, window: '1m', clock: clock() }),
      });
      const tight = {
        limiter: fixedWindow({ permitLimit: 1, window: '1m', clock: clock() }),
        skip: (req: unknown) => headerOf(req, 'x-internal') === 'yes',
      };
      const spec: AppSpec = {
        options: { global, policies: { tight } },
        routes: [{ path: '/t', limit: 'tight' }],
      };
      await run(name, spec, async (base) => {
        const skipped = await get(`${base}/t`, { 'x-internal': 'yes' });
        assert.equal(skipped.status, 200);
        assert.match(skipped.headers.get('ratelimit') ?? '', /^"global";r=2;t=60;pk=:[^:]+:$/);
        assert.equal((await get(`${base}/t`)).status, 200);
        assert.equal((await get(`${base}/t`)).status, 429, 'tight is spent');
      });
    });

    for (const [label, limiter] of [
      ['fixed window', () => fixedWindow({ permitLimit: 2, window: '1m', clock: clock() })],
      [
        'sliding window',
        () => slidingWindow({ permitLimit: 2, window: '1m', segmentsPerWindow: 4, clock: clock() }),
      ],
      [
        'token bucket',
        () => tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: '1m', clock: clock() }),
      ],
    ] as const) {
      test(`skipSuccessfulRequests (login pattern), ${label}: only failures count`, async () => {
        const login = { limiter: partitioned({ key: ip, limiter: limiter() }), skipSuccessfulRequests: true };
        const spec: AppSpec = {
          options: { policies: { login } },
          routes: [{ path: '/login', limit: 'login' }],
        };
        await run(name, spec, async (base) => {
          for (let i = 0; i < 5; i++) assert.equal((await get(`${base}/login`)).status, 200, `success ${i}`);
          assert.equal((await get(`${base}/login?throw=1`)).status, 500);
          assert.equal((await get(`${base}/login?throw=1`)).status, 500);
          assert.equal((await get(`${base}/login`)).status, 429, 'two failures spent the budget');
        });
      });
    }

    test('skipFailedRequests globally, with a chain: every member refunded, exactly once', async () => {
      const perClient = partitioned({
        key: ip,
        limiter: fixedWindow({ permitLimit: 2, window: '1m', clock: clock() }),
      });
      const everyone = fixedWindow({ permitLimit: 10, window: '1m', clock: clock() });
      const spec: AppSpec = {
        options: { global: chain(perClient, everyone), skipFailedRequests: true },
        routes: [{ path: '/a' }],
      };
      await run(name, spec, async (base) => {
        for (let i = 0; i < 4; i++) assert.equal((await get(`${base}/a?throw=1`)).status, 500);
        const ok = await get(`${base}/a`);
        assert.equal(ok.status, 200);
        assert.match(ok.headers.get('ratelimit') ?? '', /"global";r=1;.*"global\.2";r=9/);
        // The refunds landed (a refund runs after the response is sent: look once the next request is in).
        assert.equal((await get(`${base}/a`)).status, 200);
        assert.equal(everyone.statistics().available, 8, 'failures gave back every member, each once');
        assert.equal((await get(`${base}/a`)).status, 429);
      });
    });

    test('skipFailedRequests: a client that goes away before the response counts as failed, refunded once', async () => {
      const global = partitioned({
        key: ip,
        limiter: fixedWindow({ permitLimit: 1, window: '1m', clock: clock() }),
      });
      const spec: AppSpec = { options: { global, skipFailedRequests: true }, routes: [{ path: '/a' }] };
      await run(name, spec, async (base) => {
        const controller = new AbortController();
        const gone = fetch(`${base}/a?delay=300`, { signal: controller.signal }).catch(() => 'aborted');
        await new Promise((resolve) => setTimeout(resolve, 100));
        controller.abort();
        assert.equal(await gone, 'aborted');
        // The handler finishes its 300 ms after the client left; then its permit is back.
        let status = 429;
        for (let i = 0; i < 40 && status === 429; i++) {
          await new Promise((resolve) => setTimeout(resolve, 25));
          status = (await get(`${base}/a`)).status;
        }
        assert.equal(status, 200, 'the aborted request was refunded');
        assert.equal((await get(`${base}/a`)).status, 429, 'and only once');
      });
    });

    test('requestWasSuccessful decides what success is', async () => {
      const global = partitioned({
        key: ip,
        limiter: fixedWindow({ permitLimit: 1, window: '1m', clock: clock() }),
      });
      const spec: AppSpec = {
        options: {
          global,
          skipSuccessfulRequests: true,
          // Everything counts as failed: nothing is refunded.
          requestWasSuccessful: async () => false,
        },
        routes: [{ path: '/a' }],
      };
      await run(name, spec, async (base) => {
        assert.equal((await get(`${base}/a`)).status, 200);
        assert.equal((await get(`${base}/a`)).status, 429);
      });
    });

    test('the rate-limit info on the request carries the numbers of the RateLimit fields', async () => {
      const global = partitioned({
        key: ip,
        limiter: fixedWindow({ permitLimit: 5, window: '1m', clock: clock() }),
      });
      const tight = fixedWindow({ permitLimit: 3, window: '10s', clock: clock() });
      const spec: AppSpec = {
        options: { global, policies: { tight } },
        routes: [{ path: '/t', limit: 'tight' }],
      };
      await run(name, spec, async (base) => {
        const response = await get(`${base}/t?info=1`);
        assert.equal(response.status, 200);
        assert.match(
          response.headers.get('ratelimit') ?? '',
          /^"global";r=4;t=60;pk=:[^:]+:, "tight";r=2;t=10$/,
        );
        const info = JSON.parse(response.body);
        assert.equal(info.granted, true);
        assert.equal(info.policy, 'tight');
        assert.equal(info.limit, 3);
        assert.equal(info.remaining, 2);
        assert.equal(info.resetAfterMs, 10_000);
        assert.equal(info.key, undefined);
        assert.deepEqual(
          info.policies.map((p: { name: string; remaining: number; key?: string }) => [
            p.name,
            p.remaining,
            p.key,
          ]),
          [
            ['global', 4, '127.0.0.1'],
            ['tight', 2, undefined],
          ],
        );
      });
    });
  });
}

describe('options', () => {
  test('bad skip and refund options throw at construction, naming the option', () => {
    assert.throws(() => new RateLimiting({ skip: 'yes' as never }), /rateLimiting: skip must be a function/);
    assert.throws(
      () => new RateLimiting({ skipSuccessfulRequests: 'true' as never }),
      /rateLimiting: skipSuccessfulRequests must be a boolean/,
    );
    assert.throws(
      () => new RateLimiting({ requestWasSuccessful: 1 as never }),
      /rateLimiting: requestWasSuccessful must be a function/,
    );
    const limiter = fixedWindow({ permitLimit: 1, window: '1m' });
    assert.throws(
      () => new RateLimiting({ policies: { p: { limiter, skip: 1 as never } } }),
      /policies\.p\.skip must be a function/,
    );
    assert.throws(
      () => new RateLimiting({ policies: { p: { limiter, skipFailedRequests: 1 as never } } }),
      /policies\.p: skipFailedRequests must be a boolean/,
    );
    // Every one of them, globally and per policy, names the value too.
    assert.throws(() => new RateLimiting({ skipFailedRequests: 1 as never }), {
      name: 'TypeError',
      message: 'rateLimiting: skipFailedRequests must be a boolean; got 1',
    });
    assert.throws(
      () => new RateLimiting({ policies: { p: { limiter, skipSuccessfulRequests: null as never } } }),
      {
        name: 'TypeError',
        message: 'rateLimiting: policies.p: skipSuccessfulRequests must be a boolean; got null',
      },
    );
    assert.throws(
      () => new RateLimiting({ policies: { p: { limiter, requestWasSuccessful: 'x' as never } } }),
      {
        name: 'TypeError',
        message: 'rateLimiting: policies.p: requestWasSuccessful must be a function; got "x"',
      },
    );
    assert.throws(() => new RateLimiting({ skip: 'yes' as never }), {
      name: 'TypeError',
      message: /got "yes"/,
    });
  });
});
