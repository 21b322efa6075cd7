/**
 * A route's cost on Nest (Express and Fastify platforms) over real sockets: both hooks receive the
 * `ExecutionContext`; the estimate is taken in the guard, the real cost settled when the response ends.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ExecutionContext } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { FloodgateGuard, FloodgateModule, RateLimit } from '../../src/adapters/nestjs/index.ts';
import { fixedWindow } from '../../src/index.ts';
import { clock, get } from '../koa/app.ts';
import { controller, platforms, start, using } from './app.ts';

type PlatformRequest = { headers: Record<string, string | string[] | undefined> };
const header = (context: ExecutionContext, name: string) =>
  Number(context.switchToHttp().getRequest<PlatformRequest>().headers[name]);

for (const platform of platforms) {
  describe(`Nest (${platform}): cost`, () => {
    test('the estimate from the ExecutionContext in the guard, cost.actual when the response ends', async () => {
      const budget = fixedWindow({ permitLimit: 100, window: '1m', unit: 'tokens', clock: clock() });
      let ended = 0;
      const chat = {
        limiter: budget,
        cost: {
          estimate: (context: ExecutionContext) => header(context, 'x-estimate'),
          actual: (context: ExecutionContext) => {
            ended++;
            return header(context, 'x-used');
          },
        },
      };
      const Api = controller({ '/chat': [() => 'ok', RateLimit('chat')] });
      await using(
        start(platform, {
          imports: [FloodgateModule.forRoot({ policies: { chat } })],
          controllers: [Api],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        async ({ url }) => {
          const first = await get(`${url}/chat`, { 'x-estimate': '30', 'x-used': '10' });
          assert.equal(first.status, 200);
          assert.equal(first.headers.get('ratelimit'), '"tokens";r=70;t=60');
          const second = await get(`${url}/chat`, { 'x-estimate': '5', 'x-used': '5' });
          assert.equal(second.headers.get('ratelimit'), '"tokens";r=85;t=60', '100 − 10 (settled) − 5');
          assert.equal((await get(`${url}/chat`, { 'x-estimate': '86', 'x-used': '1' })).status, 429);
          assert.equal(ended, 2, 'once per admitted request');
          assert.equal(budget.statistics().available, 85);
        },
      );
    });

    test('an estimate above the limit is a 413 (reason too-large), not an exception; nothing charged', async () => {
      const budget = fixedWindow({ permitLimit: 100, window: '1m', unit: 'tokens', clock: clock() });
      const reasons: unknown[] = [];
      const chat = {
        limiter: budget,
        cost: { estimate: (context: ExecutionContext) => header(context, 'x-estimate') },
      };
      const Api = controller({ '/chat': [() => 'ok', RateLimit('chat')] });
      await using(
        start(platform, {
          imports: [
            FloodgateModule.forRoot({
              policies: { chat },
              onRejected: (ctx) => {
                reasons.push(ctx.lease.reason);
              },
            }),
          ],
          controllers: [Api],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        async ({ url }) => {
          const big = await get(`${url}/chat`, { 'x-estimate': '101' });
          assert.equal(big.status, 413);
          assert.match(big.body, /exceeds the limit \(100\) of policy/, "in Nest's own HttpException body");
          assert.deepEqual(reasons, ['too-large']);
          assert.equal(budget.statistics().available, 100);
        },
      );
    });
  });
}
