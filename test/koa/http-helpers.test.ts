/**
 * floodgate/http's shared helpers given a Koa `ctx` (or `ctx.request`), over real sockets through a real Koa app:
 * `clientIp()` follows `app.proxy` (Koa's `ctx.ip`) as it follows Express's `trust proxy`, an explicit
 * `trustedProxies` overrides it, and `headerValue()` sees a header sent on two lines through `ctx.req`'s raw
 * headers. (Its warning for `maxIpsCount` 0 is tested in rate-limiting.test.ts: floodgate/koa's `clientIp()` is
 * this one.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientIp as koaClientIp } from '../../src/adapters/koa/index.ts';
import { clientIp } from '../../src/http/client-ip.ts';
import { headerValue } from '../../src/http/keys.ts';
import { getFrom } from '../http-rate-limiting/apps.ts';
import { start, using } from './app.ts';

describe('floodgate/http helpers on a Koa ctx', () => {
  for (const proxy of [false, true]) {
    test(`clientIp() follows app.proxy (${proxy ? 'on' : 'off'}) on ctx and ctx.request`, async () => {
      const ip = clientIp();
      const koaIp = koaClientIp();
      const trusted = clientIp({ trustedProxies: ['loopback'] });
      await using(
        start((app, router) => {
          app.proxy = proxy;
          app.maxIpsCount = 1;
          router.get('/', (ctx) => {
            ctx.body = [ip(ctx), ip(ctx.request), koaIp(ctx), trusted(ctx)].join(' ');
          });
        }),
        async ({ url }) => {
          const forwarded = await getFrom(url, '127.0.0.1', {
            'x-forwarded-for': '198.51.100.9, 203.0.113.1',
          });
          const client = proxy ? '203.0.113.1' : '127.0.0.1';
          // The explicit list overrides the app's setting: the loopback peer is trusted either way.
          assert.equal(forwarded.body, `${client} ${client} ${client} 203.0.113.1`);
          const direct = await getFrom(url, '127.0.0.1');
          assert.equal(direct.body, '127.0.0.1 127.0.0.1 127.0.0.1 127.0.0.1');
        },
      );
    });
  }

  test('headerValue() gives undefined for a header sent on two lines, on ctx and ctx.request', async () => {
    const apiKey = headerValue('x-api-key');
    const auth = headerValue('authorization');
    await using(
      start((_app, router) => {
        router.get('/', (ctx) => {
          ctx.body = [apiKey(ctx), auth(ctx), apiKey(ctx.request), auth(ctx.request)]
            .map((v) => v ?? '-')
            .join(' ');
        });
      }),
      async ({ url }) => {
        const once = await getFrom(url, '127.0.0.1', { 'x-api-key': 'alice', authorization: 'Bearer a' });
        assert.equal(once.body, 'alice Bearer a alice Bearer a');
        const twice = await getFrom(url, '127.0.0.1', {
          'x-api-key': ['alice', 'bob'],
          authorization: ['Bearer a', 'Bearer b'],
        });
        assert.equal(twice.body, '- - - -');
      },
    );
  });
});
