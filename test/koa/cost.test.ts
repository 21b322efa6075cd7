/** A route's cost on Koa over a real socket: the estimate from `ctx`, the real cost from `ctx.state` or `settle`. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Context } from 'koa';
import { rateLimiting } from '../../src/adapters/koa/index.ts';
import { fixedWindow } from '../../src/index.ts';
import { clock, get, start, using } from './app.ts';

test('Koa: estimate from ctx before, ctx.state.tokens settled after, ctx.state.rateLimit.settle() at once', async () => {
  const budget = fixedWindow({ permitLimit: 100, window: '1m', unit: 'tokens', clock: clock() });
  const limiter = rateLimiting({
    policies: {
      chat: {
        limiter: budget,
        cost: {
          estimate: async (ctx: Context) => Number(ctx.get('x-estimate')),
          actual: (ctx: Context) => ctx.state.tokens as number | undefined,
        },
      },
    },
  });
  await using(
    start((app, router) => {
      app.use(limiter);
      router.get('/chat', limiter.requirePolicy('chat'), (ctx) => {
        ctx.state.tokens = Number(ctx.query.used);
        ctx.body = 'ok';
      });
      router.get('/self', limiter.requirePolicy('chat'), (ctx) => {
        ctx.state.rateLimit!.settle(Number(ctx.query.used));
        ctx.body = 'ok';
      });
    }),
    async ({ url }) => {
      const first = await get(`${url}/chat?used=10`, { 'x-estimate': '30' });
      assert.equal(first.headers.get('ratelimit-policy'), '"tokens";q=100;w=60');
      assert.equal(first.headers.get('ratelimit'), '"tokens";r=70;t=60');
      const second = await get(`${url}/self?used=25`, { 'x-estimate': '5' });
      assert.equal(second.headers.get('ratelimit'), '"tokens";r=85;t=60', '100 − 10 (settled) − 5');
      await get(`${url}/chat?used=1`, { 'x-estimate': '1' });
      assert.equal(budget.statistics().available, 100 - 10 - 25 - 1);
    },
  );
});

test('Koa: an estimate above the limit is a 413 through onRejected (reason too-large), charging nothing', async () => {
  const budget = fixedWindow({ permitLimit: 100, window: '1m', unit: 'tokens', clock: clock() });
  const reasons: unknown[] = [];
  const limiter = rateLimiting({
    policies: {
      chat: { limiter: budget, cost: { estimate: (ctx: Context) => Number(ctx.get('x-estimate')) } },
    },
    onRejected: (ctx) => {
      reasons.push(ctx.lease.reason);
    },
  });
  await using(
    start((app, router) => {
      app.use(limiter);
      router.get('/chat', limiter.requirePolicy('chat'), (ctx) => {
        ctx.body = 'ok';
      });
    }),
    async ({ url }) => {
      const big = await get(`${url}/chat`, { 'x-estimate': '101' });
      assert.equal(big.status, 413);
      assert.match(big.body, /exceeds the limit \(100\) of policy "chat"/);
      assert.deepEqual(reasons, ['too-large']);
      assert.equal(budget.statistics().available, 100);
    },
  );
});
