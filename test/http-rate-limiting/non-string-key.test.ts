/**
 * A key function that returns something other than a string (a header the client did not send, a number, an
 * object) fails that request on the framework's error path, and charges nobody: not the first client ever seen,
 * not the last one decided, not one whose slot a sweep freed (issue #23, item 6). Every adapter, real sockets.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ExecutionContext } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import type { Context } from 'koa';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/index.ts';
import { FloodgateGuard, FloodgateModule } from '../../src/adapters/nestjs/index.ts';
import { fixedWindow, partitioned } from '../../src/index.ts';
import { start as startKoa, using as usingKoa } from '../koa/app.ts';
import { controller, platforms, start as startNest, using as usingNest } from '../nestjs/app.ts';
import { adapters, get } from './apps.ts';

type Headers = Record<string, string | string[] | undefined>;

/** The key: `x-user`, or what `x-kind` asks for instead (nothing, a number, an object). */
function keyFrom(header: (name: string) => string | undefined): unknown {
  const kind = header('x-kind');
  if (kind === 'number') return 42;
  if (kind === 'object') return { id: 'alice' };
  return header('x-user');
}

/** The header reader of any adapter's request: Hono's context, or a request with `headers`. */
function headerOf(req: unknown): (name: string) => string | undefined {
  const hono = req as { req?: { header?: (name: string) => string | undefined } };
  if (typeof hono.req?.header === 'function') return (name) => hono.req!.header!(name);
  const headers = (req as { headers: Headers }).headers;
  return (name) => headers[name] as string | undefined;
}

/** A clock the test moves, so that a sweep can drop a partition whose window is over. */
function testClock() {
  return {
    t: 0,
    now() {
      return this.t;
    },
  };
}

function limiterFor<R>(key: (req: R) => unknown, clock: { now(): number }) {
  return partitioned<R>({
    key: key as (req: R) => string,
    limiter: fixedWindow({ permitLimit: 3, window: '1m', clock }),
    maxPartitions: 2,
  });
}

/**
 * The sequence, against `base`: a non-string key on a fresh limiter; after alice's partition was created; after
 * it was decided again; after a sweep dropped it. Each is a 500 and leaves every client's budget as it was.
 */
async function check(base: string, clock: { t: number }): Promise<void> {
  const remaining = async (user: string, expected: number) => {
    const response = await get(`${base}/a`, { 'x-user': user });
    assert.equal(response.status, 200, `${user}: ${response.status}`);
    assert.match(response.headers.get('ratelimit') ?? '', new RegExp(`;r=${expected};`), `${user}'s budget`);
  };
  const refused = async (when: string) => {
    for (const kind of ['none', 'number', 'object']) {
      assert.equal((await get(`${base}/a`, { 'x-kind': kind })).status, 500, `${kind} ${when}`);
    }
  };
  await refused('on a fresh limiter');
  await remaining('alice', 2);
  await refused('after a partition was created');
  await remaining('alice', 1);
  await refused('after it was decided again');
  await remaining('bob', 2);
  clock.t += 60_000;
  await remaining('bob', 2); // a new window: bob is live, alice idle
  await remaining('carol', 2); // full: the sweep drops alice
  await refused('after a sweep');
  await remaining('carol', 1);
  await remaining('bob', 1);
}

describe('a key function that returns a non-string: 500 on the error path, nobody charged', () => {
  for (const name of Object.keys(adapters)) {
    test(name, async () => {
      const clock = testClock();
      const global = limiterFor((req: unknown) => keyFrom(headerOf(req)), clock);
      const server = await adapters[name]({ options: { global }, routes: [{ path: '/a' }] });
      try {
        await check(server.url, clock);
      } finally {
        await server.close();
      }
    });
  }

  test('koa', async () => {
    const clock = testClock();
    const global = limiterFor(
      (ctx: Context) => keyFrom((name) => ctx.headers[name] as string | undefined),
      clock,
    );
    await usingKoa(
      startKoa((app, router) => {
        app.use(koaRateLimiting({ global }));
        router.get('/a', (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url, errors }) => {
        await check(url.replace(/\/$/, ''), clock);
        assert.equal(errors.length, 12, "every refusal went through Koa's error handling");
        assert.ok(errors.every((e) => e instanceof TypeError));
      },
    );
  });

  for (const platform of platforms) {
    test(`nestjs (${platform})`, async () => {
      const clock = testClock();
      const global = limiterFor(
        (context: ExecutionContext) => keyFrom(headerOf(context.switchToHttp().getRequest())),
        clock,
      );
      const Api = controller({ '/a': [() => 'ok'] });
      await usingNest(
        startNest(platform, {
          imports: [FloodgateModule.forRoot({ global })],
          controllers: [Api],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        ({ url }) => check(url, clock),
      );
    });
  }
});
