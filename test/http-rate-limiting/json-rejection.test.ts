/**
 * A JSON 429: an object given as `onRejected`'s body is sent as JSON (`application/json` unless the hook chose a
 * content type), as express-rate-limit's `message` is, on every adapter over real sockets; anything else but a
 * string is a TypeError on the framework's error path, and nothing is charged for it twice.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { APP_GUARD } from '@nestjs/core';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/rate-limiting.ts';
import { FloodgateGuard, FloodgateModule } from '../../src/adapters/nestjs/index.ts';
import type { RejectedContext } from '../../src/http/rate-limiting/options.ts';
import { fixedWindow } from '../../src/index.ts';
import { clock, get, start as startKoa, using as usingKoa } from '../koa/app.ts';
import { controller, platforms, start as startNest, using as usingNest } from '../nestjs/app.ts';
import { adapters, withApp } from './apps.ts';

// A clock that stands still: Retry-After is the whole window however long the app took to start.
const one = () => fixedWindow({ permitLimit: 1, window: '1m', clock: clock() });
const asJson = (ctx: RejectedContext) => {
  ctx.body = { error: 'rate_limited', retryAfterMs: ctx.lease.retryAfterMs === undefined ? null : 'set' };
};
const expected = { error: 'rate_limited', retryAfterMs: 'set' };

async function twice(url: string) {
  assert.equal((await get(url)).status, 200);
  return get(url);
}

describe('onRejected: an object body is sent as JSON', () => {
  for (const name of Object.keys(adapters)) {
    test(`${name}: application/json, the object serialised, Retry-After kept`, async () => {
      await withApp(
        name,
        { options: { global: one(), onRejected: asJson }, routes: [{ path: '/' }] },
        async (url) => {
          const rejected = await twice(`${url}/`);
          assert.equal(rejected.status, 429);
          assert.equal(rejected.headers.get('content-type'), 'application/json; charset=utf-8');
          assert.equal(rejected.headers.get('retry-after'), '60');
          assert.deepEqual(JSON.parse(rejected.body), expected);
        },
      );
    });

    test(`${name}: a content type the hook chose is kept`, async () => {
      const onRejected = (ctx: RejectedContext) => {
        ctx.headers.set('content-type', 'application/vnd.api+json');
        ctx.body = [{ status: '429' }];
      };
      await withApp(
        name,
        { options: { global: one(), onRejected }, routes: [{ path: '/' }] },
        async (url) => {
          const rejected = await twice(`${url}/`);
          assert.equal(rejected.headers.get('content-type'), 'application/vnd.api+json');
          assert.deepEqual(JSON.parse(rejected.body), [{ status: '429' }]);
        },
      );
    });

    test(`${name}: a body that is neither a string nor an object fails the request, clearly`, async () => {
      const onRejected = (ctx: RejectedContext) => {
        ctx.body = 42 as never;
      };
      await withApp(
        name,
        { options: { global: one(), onRejected }, routes: [{ path: '/' }] },
        async (url) => {
          const failed = await twice(`${url}/`);
          assert.equal(failed.status, 500);
          // The adapters' test apps answer an error with its message.
          if (name !== 'node') assert.match(failed.body, /onRejected: body must be a string, or an object/);
        },
      );
    });
  }

  test('koa: application/json, the object serialised', async () => {
    await usingKoa(
      startKoa((app) => {
        app.use(koaRateLimiting({ global: one(), onRejected: asJson }));
        app.use((ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url, errors }) => {
        const rejected = await twice(`${url}/`);
        assert.equal(rejected.status, 429);
        assert.equal(rejected.headers.get('content-type'), 'application/json; charset=utf-8');
        assert.deepEqual(JSON.parse(rejected.body), expected);
        assert.deepEqual(errors, []);
      },
    );
  });

  for (const platform of platforms) {
    test(`nestjs (${platform}): a text body under body: 'problem+json' is the exception's message`, async () => {
      const onRejected = (ctx: RejectedContext) => {
        ctx.body = 'slow down';
      };
      await usingNest(
        startNest(platform, {
          imports: [FloodgateModule.forRoot({ global: one(), body: 'problem+json', onRejected })],
          controllers: [controller({ '/': [() => 'ok'] })],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        async ({ url }) => {
          const rejected = await twice(`${url}/`);
          assert.equal(rejected.status, 429);
          assert.deepEqual(JSON.parse(rejected.body), { statusCode: 429, message: 'slow down' });
        },
      );
    });

    test(`nestjs (${platform}): the object is the exception's response, sent as JSON`, async () => {
      await usingNest(
        startNest(platform, {
          imports: [FloodgateModule.forRoot({ global: one(), onRejected: asJson })],
          controllers: [controller({ '/': [() => 'ok'] })],
          providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }],
        }),
        async ({ url }) => {
          const rejected = await twice(`${url}/`);
          assert.equal(rejected.status, 429);
          assert.match(rejected.headers.get('content-type')!, /^application\/json/);
          assert.equal(rejected.headers.get('retry-after'), '60');
          assert.deepEqual(JSON.parse(rejected.body), expected);
        },
      );
    });
  }
});
