/**
 * A lockout as an HTTP policy over real sockets on all six adapters (node:http, Express 5 and 4, Fastify, Hono,
 * Koa, NestJS on both platforms): failures counted through the route's refund rule, the Nth failure answered by
 * the handler, then 429 at once with `Retry-After` and `RateLimit` agreeing on the time left, and the request's
 * rate-limit info (`req.rateLimit` and each adapter's equivalent) saying when the lockout ends.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { UnauthorizedException } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { Redis } from 'ioredis';
import { clientIp as koaClientIp, rateLimiting as koaRateLimiting } from '../../src/adapters/koa/index.ts';
import {
  FloodgateGuard,
  FloodgateModule,
  clientIp as nestClientIp,
  RateLimit,
} from '../../src/adapters/nestjs/index.ts';
import { clientIp } from '../../src/http/client-ip.ts';
import type { RateLimitInfo } from '../../src/http/rate-limiting/info.ts';
import type { RejectedContext } from '../../src/http/rate-limiting/options.ts';
import { lockout, partitioned } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { clock, start as startKoa, using as usingKoa } from '../koa/app.ts';
import { controller, platforms, start as startNest, using as usingNest } from '../nestjs/app.ts';
import { RedisServer } from '../support/redis-server.ts';
import { adapters, get, withApp } from './apps.ts';

type Clock = ReturnType<typeof clock>;

/** The request's rate-limit info, read where each framework keeps it. */
function infoOf(request: unknown): RateLimitInfo | undefined {
  const r = request as {
    rateLimit?: RateLimitInfo;
    state?: { rateLimit?: RateLimitInfo };
    get?: (name: string) => unknown;
    req?: unknown;
    switchToHttp?: () => { getRequest(): { rateLimit?: RateLimitInfo } };
  };
  // Nest's hooks receive its ExecutionContext.
  if (r.switchToHttp !== undefined) return r.switchToHttp().getRequest().rateLimit;
  if (r.state !== undefined) return r.state.rateLimit;
  if (r.req !== undefined && typeof r.get === 'function') return r.get('rateLimit') as RateLimitInfo;
  return r.rateLimit;
}

/** Reports, on the 429, when the info on the request says the lockout ends. */
function onRejected(context: RejectedContext): void {
  context.headers.set('x-reason', String(context.lease.reason));
  context.headers.set('x-info-reset-ms', String(infoOf(context.request)?.resetAfterMs));
}

const settings = (c: Clock) => ({ failures: 3, within: '1m', lockFor: '30s', clock: c }) as const;

function loginPolicy<R>(c: Clock, key: (req: R) => string) {
  return {
    limiter: partitioned({ key, limiter: lockout(settings(c)) }),
    skipSuccessfulRequests: true,
    onRejected,
  };
}

/** The same attempts on every adapter: `fail` and `succeed` are URLs whose handler answers ≥ 400 and 200. */
async function play(c: Clock, fail: string, succeed: string): Promise<void> {
  assert.ok((await get(fail)).status >= 400);
  assert.ok((await get(fail)).status >= 400);
  assert.equal((await get(succeed)).status, 200, 'two failures do not lock');
  // The success cleared the count: three more failures are needed.
  assert.ok((await get(fail)).status >= 400);
  assert.ok((await get(fail)).status >= 400);
  const nth = await get(fail);
  assert.ok(
    nth.status >= 400 && nth.status !== 429,
    `the third failure is answered by the route (${nth.status})`,
  );
  assert.match(nth.headers.get('ratelimit') ?? '', /"login";r=0;t=30;/, 'its fields say the lockout began');
  c.t += 12_000;
  const locked = await get(succeed);
  assert.equal(locked.status, 429, 'the right password is refused during the lockout');
  assert.equal(locked.headers.get('retry-after'), '18', 'the time left, not the window');
  assert.match(locked.headers.get('ratelimit') ?? '', /"login";r=0;t=18;/);
  assert.equal(locked.headers.get('x-reason'), 'locked');
  assert.equal(locked.headers.get('x-info-reset-ms'), '18000', 'the request info says when it ends');
  c.t += 18_000;
  assert.equal((await get(succeed)).status, 200, 'over when it says');
}

for (const name of Object.keys(adapters)) {
  describe(`${name}: lockout`, () => {
    test('N failures lock the client out; 429 with the time left in Retry-After, RateLimit and the info', async () => {
      const c = clock(1_000);
      const spec = {
        options: { policies: { login: loginPolicy(c, clientIp()) } },
        routes: [{ path: '/login', limit: 'login' }],
      };
      await withApp(name, spec, (base) => play(c, `${base}/login?throw=1`, `${base}/login`));
    });
  });
}

describe('koa: lockout', () => {
  test('N failures lock the client out; 429 with the time left in Retry-After, RateLimit and ctx.state', async () => {
    const c = clock(1_000);
    const limiter = koaRateLimiting({ policies: { login: loginPolicy(c, koaClientIp()) } });
    await usingKoa(
      startKoa((app, router) => {
        app.use(limiter);
        router.get('/login', limiter.requirePolicy('login'), (ctx) => {
          if (ctx.query.pw === 'right') ctx.body = 'ok';
          else ctx.status = 401;
        });
      }),
      ({ url }) => play(c, `${url}/login?pw=wrong`, `${url}/login?pw=right`),
    );
  });
});

for (const platform of platforms) {
  describe(`nestjs (${platform}): lockout`, () => {
    test('N failures lock the client out; 429 with the time left in Retry-After, RateLimit and the request', async () => {
      const c = clock(1_000);
      // Two handlers of one policy (one key, the address): a wrong password and the right one.
      const Api = controller({
        '/wrong': [
          () => {
            throw new UnauthorizedException();
          },
          RateLimit('login'),
        ],
        '/right': [() => 'ok', RateLimit('login')],
      });
      await usingNest(
        startNest(platform, {
          imports: [FloodgateModule.forRoot({ policies: { login: loginPolicy(c, nestClientIp()) } })],
          controllers: [Api],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        ({ url }) => play(c, `${url}/wrong`, `${url}/right`),
      );
    });
  });
}

describe('on Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  before(async () => {
    server = await RedisServer.start();
  });
  after(async () => {
    for (const client of clients) client.disconnect();
    await server.stop();
  });
  let names = 0;

  for (const name of Object.keys(adapters)) {
    test(`${name}: the same lockout kept in Redis (a success's refund clears it there)`, async () => {
      const c = clock(1_000);
      const client = new Redis({ port: server.port });
      clients.push(client);
      const store = redisStore({ client, clock: c, timeoutMs: 2000 });
      const login = {
        limiter: store.partitioned({
          name: `login-${name}-${names++}`,
          key: clientIp(),
          limiter: lockout(settings(c)),
        }),
        skipSuccessfulRequests: true,
        onRejected,
      };
      const spec = { options: { policies: { login } }, routes: [{ path: '/login', limit: 'login' }] };
      await withApp(name, spec, (base) => play(c, `${base}/login?throw=1`, `${base}/login`));
    });
  }
});
