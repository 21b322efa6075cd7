/**
 * A key locked by `lock(key, duration)` over real sockets on every adapter (node:http, Express 5 and 4, Fastify,
 * Hono, Koa, NestJS on both platforms): 429, reason 'locked', and Retry-After the lock's time left (never the
 * window's); other keys and the key once unlocked go through.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ExecutionContext } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/index.ts';
import { FloodgateGuard, FloodgateModule } from '../../src/adapters/nestjs/index.ts';
import { headerValue } from '../../src/http/index.ts';
import type { RejectedContext } from '../../src/http/rate-limiting/options.ts';
import { fixedWindow, partitioned } from '../../src/index.ts';
import { clock, get as koaGet, start as startKoa, using as usingKoa } from '../koa/app.ts';
import { controller, platforms, start as startNest, using as usingNest } from '../nestjs/app.ts';
import { adapters, get, withApp } from './apps.ts';

const user = headerValue('x-user');
const said = (context: RejectedContext) => {
  context.body = JSON.stringify({ reason: context.lease.reason });
};

/** A per-user limiter of 5 a second, 'mallory' locked for 90.5 s at t = 0 and asked at t = 2 s. */
function lockedLimiter<R>(key: (request: R) => string) {
  const c = clock();
  const perUser = partitioned({ key, limiter: fixedWindow({ permitLimit: 5, window: '1s', clock: c }) });
  perUser.lock('mallory', 90_500);
  c.t = 2000;
  return perUser;
}

async function expectLocked(base: string, ask: typeof get): Promise<void> {
  const locked = await ask(`${base}/a`, { 'x-user': 'mallory' });
  assert.equal(locked.status, 429);
  assert.equal(locked.headers.get('retry-after'), '89', 'ceil(88.5 s) left on the lock, not the 1 s window');
  assert.match(locked.body, /\\?"reason\\?":\\?"locked/, "onRejected saw reason 'locked'");
  assert.equal((await ask(`${base}/a`, { 'x-user': 'alice' })).status, 200, 'other keys go through');
}

for (const name of Object.keys(adapters)) {
  describe(`${name}: a locked key`, () => {
    test("429, reason 'locked', Retry-After the lock's time left; unlock lets it in", async () => {
      const perUser = lockedLimiter((req: unknown) => user(req as never) ?? 'anonymous');
      const options = { global: perUser, onRejected: said };
      await withApp(name, { options, routes: [{ path: '/a' }] }, async (base) => {
        await expectLocked(base, get);
        perUser.unlock('mallory');
        assert.equal((await get(`${base}/a`, { 'x-user': 'mallory' })).status, 200);
      });
    });
  });
}

describe('koa: a locked key', () => {
  test("429, reason 'locked', Retry-After the lock's time left; unlock lets it in", async () => {
    const perUser = lockedLimiter((ctx: { get(name: string): string }) => ctx.get('x-user') || 'anonymous');
    const limiter = koaRateLimiting({ global: perUser, onRejected: said });
    await usingKoa(
      startKoa((app, router) => {
        app.use(limiter);
        router.get('/a', (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        await expectLocked(url, koaGet);
        perUser.unlock('mallory');
        assert.equal((await koaGet(`${url}/a`, { 'x-user': 'mallory' })).status, 200);
      },
    );
  });
});

for (const platform of platforms) {
  describe(`nestjs (${platform}): a locked key`, () => {
    test("429, reason 'locked', Retry-After the lock's time left; unlock lets it in", async () => {
      const perUser = lockedLimiter((context: ExecutionContext) => {
        const value = context.switchToHttp().getRequest<{ headers: Record<string, unknown> }>().headers[
          'x-user'
        ];
        return typeof value === 'string' ? value : 'anonymous';
      });
      const Api = controller({ '/a': [() => 'ok'] });
      await usingNest(
        startNest(platform, {
          imports: [FloodgateModule.forRoot({ global: perUser, onRejected: said })],
          controllers: [Api],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        async ({ url }) => {
          await expectLocked(url, get);
          perUser.unlock('mallory');
          assert.equal((await get(`${url}/a`, { 'x-user': 'mallory' })).status, 200);
        },
      );
    });
  });
}
