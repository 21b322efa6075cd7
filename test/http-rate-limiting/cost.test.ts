import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { clientIp } from '../../src/http/client-ip.ts';
import { chain, fixedWindow, partitioned, tokenBucket } from '../../src/index.ts';
import { type AppSpec, adapters, get, withApp } from './apps.ts';

/**
 * A route's cost (`cost: { estimate, actual }` on a policy) on every adapter over real sockets: the estimate is
 * taken before the handler, the real cost settled when the response ends — from what the handler reported (a
 * header it set, read by `cost.actual` from the framework's response), or by the handler itself
 * (`rateLimit.settle(n)`). Aborted clients and throwing handlers keep the estimate, once.
 */
const ip = clientIp();
const clock = () => ({ now: () => 0 });

function headerOf(req: unknown, name: string): string | undefined {
  const r = req as { headers?: Record<string, unknown>; req?: { header(n: string): string | undefined } };
  if (r.req !== undefined && typeof r.req.header === 'function') return r.req.header(name);
  const value = r.headers?.[name];
  return typeof value === 'string' ? value : undefined;
}

/** The `x-used` header the handler set, read from the framework's response (Hono: the context's `res`). */
function usedOf(res: unknown): number | undefined {
  const r = res as { getHeader?(n: string): unknown; res?: Response };
  const value = typeof r.getHeader === 'function' ? r.getHeader('x-used') : r.res?.headers.get('x-used');
  return value === undefined || value === null ? undefined : Number(value);
}

const estimateOf = (req: unknown) => Number(headerOf(req, 'x-estimate') ?? 1);

function tokens(limit = 100) {
  return fixedWindow({ permitLimit: limit, window: '1m', unit: 'tokens', clock: clock() });
}

/** The `r` of the `"tokens"` item in a RateLimit field. */
function left(field: string | null, name = 'tokens'): number {
  const match = new RegExp(`"${name.replace('.', '\\.')}";r=(\\d+)`).exec(field ?? '');
  assert.ok(match, `no "${name}" item in ${field}`);
  return Number(match[1]);
}

for (const name of Object.keys(adapters)) {
  describe(`${name}: cost`, () => {
    for (const kind of ['sync', 'async'] as const) {
      test(`estimate (${kind}) taken before, the handler's reported cost settled after; fields say "tokens"`, async () => {
        const limiter = tokens();
        const estimate = kind === 'sync' ? estimateOf : async (req: unknown) => estimateOf(req);
        const spec: AppSpec = {
          options: {
            policies: { chat: { limiter, cost: { estimate, actual: (_req, res) => usedOf(res) } } },
          },
          routes: [{ path: '/chat', limit: 'chat' }],
        };
        await withApp(name, spec, async (base) => {
          const first = await get(`${base}/chat?used=10`, { 'x-estimate': '30' });
          assert.equal(first.status, 200);
          assert.equal(first.headers.get('ratelimit-policy'), '"tokens";q=100;w=60');
          assert.equal(left(first.headers.get('ratelimit')), 70, 'the estimate was taken');
          const second = await get(`${base}/chat`, { 'x-estimate': '5' });
          // 100 − 10 (settled) − 5: the first request gave 20 back when its response ended.
          assert.equal(left(second.headers.get('ratelimit')), 85);
          await get(`${base}/chat?used=40`, { 'x-estimate': '1' });
          await get(`${base}/chat?used=1`, { 'x-estimate': '1' });
          assert.equal(limiter.statistics().available, 100 - 10 - 5 - 40 - 1, 'a charge past the estimate');
        });
      });
    }

    test('the handler settles itself (rateLimit.settle); cost.actual is then not asked', async () => {
      const limiter = tokens();
      let asked = 0;
      const spec: AppSpec = {
        options: {
          policies: {
            chat: {
              limiter,
              cost: {
                estimate: estimateOf,
                actual: () => {
                  asked++;
                  return 1;
                },
              },
            },
          },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        assert.equal((await get(`${base}/chat?settle=50`, { 'x-estimate': '10' })).status, 200);
        const next = await get(`${base}/chat?settle=0`, { 'x-estimate': '1' });
        assert.equal(left(next.headers.get('ratelimit')), 100 - 50 - 1);
        assert.equal(limiter.statistics().available, 50);
        assert.equal(asked, 0);
      });
    });

    test('a chain of a requests quota and a tokens quota: one per request, the estimate in tokens', async () => {
      const requests = partitioned({
        key: ip,
        limiter: fixedWindow({ permitLimit: 3, window: '1m', clock: clock() }),
      });
      const budget = tokens();
      const spec: AppSpec = {
        options: {
          global: requests,
          policies: {
            chat: { limiter: budget, cost: { estimate: estimateOf, actual: (_q, r) => usedOf(r) } },
          },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        const first = await get(`${base}/chat?used=20`, { 'x-estimate': '40' });
        assert.match(
          first.headers.get('ratelimit-policy') ?? '',
          /^"global";q=3;w=60;pk=:[^:]+:, "tokens";q=100;w=60$/,
        );
        assert.match(
          first.headers.get('ratelimit') ?? '',
          /^"global";r=2;t=60;pk=:[^:]+:, "tokens";r=60;t=60$/,
        );
        // 80 tokens left once the first settled at 20 (60 had it kept its estimate).
        const second = await get(`${base}/chat`, { 'x-estimate': '75' });
        assert.equal(second.status, 200);
        assert.match(second.headers.get('ratelimit') ?? '', /"global";r=1;.*"tokens";r=5;/);
      });
    });

    test('a throwing handler keeps its estimate, charged once', async () => {
      const limiter = tokens();
      const spec: AppSpec = {
        options: {
          policies: { chat: { limiter, cost: { estimate: estimateOf, actual: (_q, r) => usedOf(r) } } },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        assert.equal((await get(`${base}/chat?throw=1`, { 'x-estimate': '30' })).status, 500);
        const next = await get(`${base}/chat`, { 'x-estimate': '1' });
        assert.equal(left(next.headers.get('ratelimit')), 100 - 30 - 1);
      });
    });

    test('a client that goes away keeps its estimate, charged once', async () => {
      const limiter = tokens();
      let actualCalls = 0;
      // No sleeps to line up with: the client leaves once the server has taken the estimate, and the check runs
      // once cost.actual was asked.
      let decided = () => {};
      let ended = () => {};
      const taken = new Promise<void>((resolve) => {
        decided = resolve;
      });
      const asked = new Promise<void>((resolve) => {
        ended = resolve;
      });
      const spec: AppSpec = {
        options: {
          policies: {
            chat: {
              limiter,
              cost: {
                estimate: (req) => {
                  decided();
                  return estimateOf(req);
                },
                actual: () => {
                  actualCalls++;
                  ended();
                  return undefined;
                },
              },
            },
          },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        const request = http.get(`${base}/chat?delay=200`, { headers: { 'x-estimate': '30' } });
        request.on('error', () => {});
        await taken;
        request.destroy();
        await asked;
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal(limiter.statistics().available, 70, 'the estimate stands');
        assert.equal(actualCalls, 1, 'asked once, at the end');
      });
    });

    test('a client that goes away while its estimate waits in the queue is charged nothing', async () => {
      let t = 0;
      const limiter = tokenBucket({
        tokenLimit: 100,
        tokensPerPeriod: 100,
        period: '1m',
        queueLimit: 500,
        unit: 'tokens',
        clock: { now: () => t },
      });
      const spec: AppSpec = {
        options: { policies: { chat: { limiter, cost: { estimate: estimateOf } } } },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        assert.equal((await get(`${base}/chat`, { 'x-estimate': '100' })).status, 200);
        const request = http.get(`${base}/chat`, { headers: { 'x-estimate': '30' } });
        request.on('error', () => {});
        for (let i = 0; i < 10_000 && limiter.statistics().queued !== 30; i++) {
          await new Promise((resolve) => setImmediate(resolve));
        }
        assert.equal(limiter.statistics().queued, 30, 'it waits');
        request.destroy();
        for (let i = 0; i < 10_000 && limiter.statistics().queued !== 0; i++) {
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
        assert.equal(limiter.statistics().queued, 0, 'it left the queue');
        t = 60_000;
        assert.equal(limiter.statistics().available, 100, 'and nothing was charged when the bucket refilled');
      });
    });

    test('with a refund rule: a settled cost stands, an unsettled estimate is given back', async () => {
      const limiter = tokens();
      const spec: AppSpec = {
        options: {
          policies: { chat: { limiter, cost: { estimate: estimateOf }, skipSuccessfulRequests: true } },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        assert.equal((await get(`${base}/chat?settle=10`, { 'x-estimate': '30' })).status, 200);
        assert.equal((await get(`${base}/chat`, { 'x-estimate': '30' })).status, 200);
        await get(`${base}/chat?settle=0`, { 'x-estimate': '1' });
        assert.equal(limiter.statistics().available, 90, 'the settled 10 stands; the other 30 came back');
      });
    });

    test('bad estimates go to the error path and charge nothing', async () => {
      const limiter = tokens();
      const spec: AppSpec = {
        options: { policies: { chat: { limiter, cost: { estimate: estimateOf } } } },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        for (const bad of ['-1', '0', '1.5', 'NaN', 'Infinity']) {
          assert.equal((await get(`${base}/chat`, { 'x-estimate': bad })).status, 500, bad);
        }
        assert.equal(limiter.statistics().available, 100);
      });
    });

    test('an estimate over the limit is a 413 naming the limit and the policy, charging nothing', async () => {
      const limiter = tokens();
      const requests = fixedWindow({ permitLimit: 10, window: '1m', clock: clock() });
      const seen: unknown[] = [];
      const spec: AppSpec = {
        options: {
          policies: {
            chat: { limiter: chain(requests, limiter), cost: { estimate: estimateOf } },
            queued: {
              limiter: tokenBucket({
                tokenLimit: 100,
                tokensPerPeriod: 10,
                period: '1s',
                queueLimit: 500,
                unit: 'tokens',
              }),
              cost: { estimate: async (req) => estimateOf(req) },
            },
          },
          onRejected: (ctx) => {
            seen.push([ctx.lease.reason, ctx.lease.limit, ctx.status, ctx.limiter, ctx.policy]);
          },
        },
        routes: [
          { path: '/chat', limit: 'chat' },
          { path: '/queued', limit: 'queued' },
        ],
      };
      await withApp(name, spec, async (base) => {
        const big = await get(`${base}/chat`, { 'x-estimate': '101' });
        assert.equal(big.status, 413);
        assert.equal(big.headers.get('retry-after'), null, 'retrying cannot help');
        // Named as in RateLimit-Policy: the chain's second member.
        assert.match(big.body, /cost estimate exceeds the limit \(100\) of policy "chat\.2"/);
        assert.equal(left(big.headers.get('ratelimit')), 100, 'the fields say the budget is untouched');
        assert.equal(limiter.statistics().available, 100);
        assert.equal(requests.statistics().available, 10, 'the requests member is not charged either');
        // A route that may queue asks with acquire: the same answer, at once.
        assert.equal((await get(`${base}/queued`, { 'x-estimate': '101' })).status, 413);
        assert.equal(
          (await get(`${base}/chat`, { 'x-estimate': '100' })).status,
          200,
          'the whole budget fits',
        );
        assert.deepEqual(seen, [
          ['too-large', 100, 413, 'endpoint', 'chat'],
          ['too-large', 100, 413, 'endpoint', 'queued'],
        ]);
      });
    });

    test('with overdraw: true an estimate over the limit is granted when the whole budget is free', async () => {
      const limiter = fixedWindow({
        permitLimit: 100,
        window: '1m',
        unit: 'tokens',
        clock: clock(),
        overdraw: true,
      });
      const spec: AppSpec = {
        options: { policies: { chat: { limiter, cost: { estimate: estimateOf } } } },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        assert.equal((await get(`${base}/chat`, { 'x-estimate': '150' })).status, 200);
        const next = await get(`${base}/chat`, { 'x-estimate': '150' });
        assert.equal(next.status, 429, 'in debt: the budget is not free');
        assert.equal(limiter.statistics().available, 0);
      });
    });

    test('two members counting tokens are told apart by policy name; rateLimit.policies carries the names', async () => {
      const perClient = partitioned({
        key: ip,
        limiter: fixedWindow({ permitLimit: 50, window: '1m', unit: 'tokens', clock: clock() }),
      });
      const spec: AppSpec = {
        options: {
          global: perClient,
          policies: { chat: { limiter: tokens(), cost: { estimate: estimateOf } } },
        },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      await withApp(name, spec, async (base) => {
        const answer = await get(`${base}/chat?info=1`, { 'x-estimate': '20' });
        assert.match(
          answer.headers.get('ratelimit-policy') ?? '',
          /^"global\.tokens";q=50;w=60;pk=:[^:]+:, "chat\.tokens";q=100;w=60$/,
        );
        const info = JSON.parse(answer.body) as { policies: { name: string; remaining: number }[] };
        assert.deepEqual(
          info.policies.map((p) => [p.name, p.remaining]),
          [
            ['global.tokens', 30],
            ['chat.tokens', 80],
          ],
        );
      });
    });

    test('a bad actual keeps the estimate, with a FLOODGATE_COST_ACTUAL warning naming the value', async () => {
      const limiter = tokenBucket({
        tokenLimit: 100,
        tokensPerPeriod: 1,
        period: '1h',
        unit: 'tokens',
        clock: clock(),
      });
      const warnings: Error[] = [];
      const onWarning = (warning: Error) => warnings.push(warning);
      process.on('warning', onWarning);
      const spec: AppSpec = {
        options: { policies: { chat: { limiter, cost: { estimate: estimateOf, actual: () => -5 } } } },
        routes: [{ path: '/chat', limit: 'chat' }],
      };
      try {
        await withApp(name, spec, async (base) => {
          await get(`${base}/chat`, { 'x-estimate': '30' });
          await get(`${base}/chat`, { 'x-estimate': '1' });
          await new Promise((resolve) => setImmediate(resolve));
          assert.equal(limiter.statistics().available, 69);
        });
      } finally {
        process.off('warning', onWarning);
      }
      const ours = warnings.find((w) => (w as { code?: string }).code === 'FLOODGATE_COST_ACTUAL');
      assert.ok(ours, 'warned');
      assert.match(ours.message, /policy "chat": cost\.actual\(req, res\) answered -5/);
    });
  });
}

test('cost options are checked when the policy is built', async () => {
  const { RateLimiting } = await import('../../src/http/rate-limiting/engine.ts');
  const limiter = tokens();
  assert.throws(
    () => new RateLimiting({ policies: { chat: { limiter, cost: { estimate: 5 as never } } } }),
    /rateLimiting: policies\.chat\.cost\.estimate must be a function \(req, res\) => number; got 5/,
  );
  assert.throws(
    () =>
      new RateLimiting({
        policies: { chat: { limiter, cost: { estimate: () => 1, actaul: () => 1 } as never } },
      }),
    /actaul/,
  );
  assert.throws(
    () => new RateLimiting({ policies: { chat: { limiter, cost: 'big' as never } } }),
    /policies\.chat\.cost must be an object \{ estimate, actual\? \}; got "big"/,
  );
});
