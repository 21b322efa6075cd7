/**
 * floodgate/koa's rateLimiting over real sockets through a real Koa 3 app and @koa/router: 429 with body and
 * Retry-After per algorithm, a concurrency queue in both orders with the permit held until the response is
 * written, global + named policy as one chain (whatever the order of middleware and markers), per-user keys with
 * the IP fallback under app.proxy on and off, skip and refunds on ctx, onRejected on ctx, a throwing key.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import type { Context } from 'koa';
import { clientIp, rateLimiting } from '../../src/adapters/koa/index.ts';
import { resetWarnings } from '../../src/http/warnings.ts';
import { concurrency, fixedWindow, partitioned, slidingWindow, tokenBucket } from '../../src/index.ts';
import { clock, gate, get, start, until, using } from './app.ts';

describe('Koa rateLimiting', () => {
  test('429 with a text body and Retry-After, per algorithm; the RateLimit fields on admitted responses', async () => {
    const c = clock();
    const fixed = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
    const sliding = slidingWindow({ permitLimit: 2, window: '10s', segmentsPerWindow: 5, clock: c });
    const bucket = tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: '3s', clock: c });
    const limiter = rateLimiting({ policies: { fixed, sliding, bucket } });
    await using(
      start((app, router) => {
        app.use(limiter);
        for (const name of ['fixed', 'sliding', 'bucket']) {
          router.get(`/${name}`, limiter.requirePolicy(name), (ctx) => {
            ctx.body = 'ok';
          });
        }
      }),
      async ({ url }) => {
        const first = await get(`${url}/fixed`);
        assert.equal(first.status, 200);
        assert.equal(first.body, 'ok');
        assert.match(first.headers.get('ratelimit-policy')!, /"fixed";q=1;w=10/);
        c.t = 4_000;
        const f = await get(`${url}/fixed`);
        assert.equal(f.status, 429);
        assert.equal(f.headers.get('retry-after'), '6');
        assert.match(f.headers.get('content-type')!, /^text\/plain/);
        assert.equal(f.body, 'Too many requests. Try again in 6 seconds.');

        c.t = 0;
        await get(`${url}/sliding`);
        c.t = 4_500;
        await get(`${url}/sliding`);
        const s = await get(`${url}/sliding`);
        assert.equal(s.status, 429);
        assert.equal(s.headers.get('retry-after'), '6', 'the first segment leaves the window at t=10s');

        c.t = 4_000;
        await get(`${url}/bucket`);
        c.t = 5_000;
        const b = await get(`${url}/bucket`);
        assert.equal(b.status, 429);
        assert.equal(b.headers.get('retry-after'), '1', 'tokens come every 3 s from t=0: the next at t=6s');
      },
    );
  });

  test('a middleware around the limiter sees a rejected request end (no next() of its own is left waiting)', async () => {
    const c = clock();
    const limiter = rateLimiting({
      global: fixedWindow({ permitLimit: 1, window: '10s', clock: c }),
      policies: { hooked: fixedWindow({ permitLimit: 1, window: '10s', clock: c }) },
      onRejected: async ({ policy }) => {
        // An awaited hook: the rejection's flow is asynchronous.
        await Promise.resolve(policy);
      },
    });
    const plain = rateLimiting({ global: fixedWindow({ permitLimit: 1, window: '10s', clock: c }) });
    const ended: string[] = [];
    await using(
      start((app, router) => {
        app.use(async (ctx, next) => {
          await next();
          ended.push(`${ctx.path} ${ctx.status}`);
          ctx.set('x-outer', 'after');
        });
        router.get('/plain', plain, (ctx) => {
          ctx.body = 'ok';
        });
        router.get('/hooked', limiter, (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        assert.equal((await get(`${url}/plain`)).status, 200);
        const plainRejected = await get(`${url}/plain`);
        assert.equal(plainRejected.status, 429);
        assert.equal(plainRejected.headers.get('x-outer'), 'after');
        assert.equal((await get(`${url}/hooked`)).status, 200);
        const hookedRejected = await get(`${url}/hooked`);
        assert.equal(hookedRejected.status, 429);
        assert.equal(hookedRejected.headers.get('x-outer'), 'after');
        assert.deepEqual(ended, ['/plain 200', '/plain 429', '/hooked 200', '/hooked 429']);
      },
    );
  });

  test('problem+json body and a custom status', async () => {
    const c = clock();
    const limiter = rateLimiting({
      global: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
      body: 'problem+json',
      status: 503,
    });
    await using(
      start((app, router) => {
        app.use(limiter);
        router.get('/', (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        assert.equal((await get(url)).status, 200);
        const rejected = await get(url);
        assert.equal(rejected.status, 503);
        assert.match(rejected.headers.get('content-type')!, /^application\/problem\+json/);
        assert.equal(JSON.parse(rejected.body).status, 503);
        assert.equal(rejected.headers.get('retry-after'), '60');
      },
    );
  });

  for (const queueOrder of ['oldest-first', 'newest-first'] as const) {
    test(`a concurrency queue admits ${queueOrder}, rejects past the queue, holds the permit until the body is written`, async () => {
      const slots = concurrency({ permitLimit: 1, queueLimit: 2, queueOrder });
      const limiter = rateLimiting({ policies: { slots } });
      const holder = gate();
      const admitted: string[] = [];
      let stream: PassThrough | undefined;
      await using(
        start((app, router) => {
          app.use(limiter);
          router.get('/slow', limiter.requirePolicy('slots'), async (ctx) => {
            const name = String(ctx.query.name);
            admitted.push(name);
            if (name === 'holder') await holder.promise;
            if (name === 'stream') {
              // The chain settles now; the body is written later: the permit must stay held until it is.
              stream = new PassThrough();
              ctx.body = stream;
              stream.write('first ');
              return;
            }
            ctx.body = name;
          });
        }),
        async ({ url }) => {
          const first = get(`${url}/slow?name=holder`);
          await until(() => admitted.length === 1, 'the holder');
          const a = get(`${url}/slow?name=a`);
          await until(() => slots.statistics().queued === 1, 'a queued');
          const b = get(`${url}/slow?name=b`);
          await until(() => slots.statistics().queued === 2, 'b queued');
          const c = get(`${url}/slow?name=c`);
          if (queueOrder === 'oldest-first')
            assert.equal((await c).status, 429, 'queue full: the newcomer is rejected');
          else assert.equal((await a).status, 429, 'queue full: the oldest waiter is evicted');
          holder.open();
          const answers = await Promise.all([first, a, b, c]);
          assert.deepEqual(
            answers.map((r) => r.status),
            queueOrder === 'oldest-first' ? [200, 200, 200, 429] : [200, 429, 200, 200],
          );
          assert.deepEqual(
            admitted,
            queueOrder === 'oldest-first' ? ['holder', 'a', 'b'] : ['holder', 'c', 'b'],
          );
          assert.equal(slots.statistics().available, 1);

          const streamed = fetch(`${url}/slow?name=stream`).then((r) => r.text());
          await until(() => stream !== undefined, 'the stream');
          assert.equal(slots.statistics().available, 0, 'held while the body is written');
          const d = get(`${url}/slow?name=d`);
          await until(() => slots.statistics().queued === 1, 'd queued behind the streaming response');
          assert.ok(!admitted.includes('d'));
          stream!.end('last');
          assert.equal(await streamed, 'first last');
          assert.equal((await d).body, 'd', 'admitted once the body was written');
          await until(() => slots.statistics().available === 1, 'the permit back');
        },
      );
    });
  }

  test('a client gone while its body streams gives the permit back', async () => {
    const slots = concurrency({ permitLimit: 1 });
    const limiter = rateLimiting({ global: slots });
    let stream: PassThrough | undefined;
    await using(
      start((app, router) => {
        app.use(limiter);
        router.get('/', (ctx) => {
          stream = new PassThrough();
          ctx.body = stream;
          stream.write('x');
        });
      }),
      async ({ url }) => {
        const controller = new AbortController();
        const response = await fetch(url, { signal: controller.signal });
        assert.equal(response.status, 200);
        assert.equal(slots.statistics().available, 0);
        controller.abort();
        await until(() => slots.statistics().available === 1, 'the permit back after the disconnect');
        stream!.destroy();
      },
    );
  });

  for (const order of ['middleware first', 'routes first (markers decide)'] as const) {
    test(`global + named policy are one chain, decided once (${order}): an endpoint rejection burns no global permit`, async () => {
      const c = clock();
      const global = fixedWindow({ permitLimit: 3, window: '10s', clock: c });
      const tight = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      let keyCalls = 0;
      const perClient = partitioned({
        key: (ctx: Context) => {
          keyCalls++;
          return ctx.get('x-client') || 'anon';
        },
        limiter: fixedWindow({ permitLimit: 100, window: '10s', clock: c }),
      });
      const limiter = rateLimiting({ global, policies: { tight, keyed: perClient } });
      await using(
        start((app, router) => {
          if (order === 'middleware first') app.use(limiter);
          router.get('/tight', limiter.requirePolicy('tight'), (ctx) => {
            ctx.body = 'ok';
          });
          router.get('/keyed', limiter.requirePolicy('keyed'), (ctx) => {
            ctx.body = 'ok';
          });
          router.get('/open', limiter.noRateLimit(), (ctx) => {
            ctx.body = 'open';
          });
        }),
        async ({ url }) => {
          assert.equal((await get(`${url}/tight`)).status, 200);
          const rejected = await get(`${url}/tight`);
          assert.equal(rejected.status, 429);
          assert.match(rejected.headers.get('ratelimit-policy')!, /"tight"/);
          assert.equal(global.statistics().available, 2, 'the rejected request took no global permit');
          assert.equal((await get(`${url}/keyed`)).status, 200);
          assert.equal(keyCalls, 1, 'the key function ran once for the request');
          assert.equal(global.statistics().available, 1, 'one global permit for global + policy');
          for (let i = 0; i < 5; i++) assert.equal((await get(`${url}/open`)).status, 200);
          assert.equal(global.statistics().available, 1, 'noRateLimit() routes take nothing');
        },
      );
    });
  }

  test('a marker that names an unknown policy fails at startup', () => {
    const limiter = rateLimiting({ policies: { login: fixedWindow({ permitLimit: 1, window: '1m' }) } });
    assert.throws(() => limiter.requirePolicy('logn'), /no rate-limiting policy named "logn"/);
  });

  for (const proxy of [false, true]) {
    test(`per-user keys from ctx.state.user, the client address otherwise (app.proxy ${proxy ? 'on' : 'off'})`, async () => {
      const c = clock();
      const ip = clientIp();
      const limiter = rateLimiting<{ user?: { id: string } }>({
        global: partitioned({
          key: (ctx) => (ctx.state.user ? `user:${ctx.state.user.id}` : ip(ctx)),
          limiter: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
        }),
      });
      await using(
        start((app, router) => {
          app.proxy = proxy;
          app.maxIpsCount = 1;
          app.use(async (ctx, next) => {
            const user = ctx.get('x-user');
            if (user) ctx.state.user = { id: user };
            await next();
          });
          app.use(limiter);
          router.get('/', (ctx) => {
            ctx.body = ctx.state.rateLimit?.key ?? 'none';
          });
        }),
        async ({ url }) => {
          const alice = await get(url, { 'x-user': 'alice' });
          assert.equal(alice.status, 200);
          assert.equal((await get(url, { 'x-user': 'alice' })).status, 429);
          assert.equal((await get(url, { 'x-user': 'bob' })).status, 200, 'a user of its own');
          const one = await get(url, { 'x-forwarded-for': '203.0.113.1' });
          assert.equal(one.status, 200);
          const two = await get(url, { 'x-forwarded-for': '203.0.113.2' });
          // Behind a trusted proxy each client has its own key; without, the forwarded header is not believed.
          assert.equal(two.status, proxy ? 200 : 429);
          const spoofed = await get(url, { 'x-forwarded-for': '198.51.100.9, 203.0.113.1' });
          assert.equal(spoofed.status, 429, 'only the entry the last proxy wrote counts');
        },
      );
    });
  }

  test('skip, skipFailedRequests and requestWasSuccessful see ctx; the info is on ctx.state.rateLimit', async () => {
    const c = clock();
    const global = fixedWindow({ permitLimit: 2, window: '1m', clock: c });
    const seen: string[] = [];
    const limiter = rateLimiting({
      global,
      skip: (ctx) => ctx.path === '/health',
      skipFailedRequests: true,
      requestWasSuccessful: (ctx) => {
        seen.push(`${ctx.method} ${ctx.path} ${ctx.status}`);
        return ctx.status < 400 && ctx.get('x-fail') === '';
      },
    });
    await using(
      start((app, router) => {
        app.use(limiter);
        router.get('/health', (ctx) => {
          ctx.body = String(ctx.state.rateLimit === undefined);
        });
        router.get('/info', (ctx) => {
          ctx.body = JSON.stringify({
            limit: ctx.state.rateLimit?.limit,
            remaining: ctx.state.rateLimit?.remaining,
          });
        });
        router.get('/fail', (ctx) => {
          ctx.status = 500;
          ctx.body = 'failed';
        });
        router.get('/throw', () => {
          throw new Error('handler failed on purpose');
        });
      }),
      async ({ url, errors }) => {
        for (let i = 0; i < 4; i++) {
          const health = await get(`${url}/health`);
          assert.equal(health.body, 'true', 'skipped: no info');
          assert.equal(health.headers.get('ratelimit'), null);
        }
        assert.equal(global.statistics().available, 2, 'skipped requests count nothing');
        assert.equal((await get(`${url}/fail`)).status, 500);
        await until(() => global.statistics().available === 2, 'the failed request refunded');
        assert.equal((await get(`${url}/throw`)).status, 500);
        await until(() => global.statistics().available === 2, 'the thrown request refunded');
        assert.equal(errors.length, 1, "the handler's error went to app 'error'");
        assert.equal((await get(`${url}/info`, { 'x-fail': '1' })).status, 200);
        await until(() => global.statistics().available === 2, 'requestWasSuccessful said failed');
        const info = await get(`${url}/info`);
        assert.deepEqual(JSON.parse(info.body), { limit: 2, remaining: 1 });
        assert.equal(global.statistics().available, 1, 'a success is kept');
        assert.ok(seen.includes('GET /fail 500'));
      },
    );
  });

  test('onRejected receives ctx and may answer by itself', async () => {
    const c = clock();
    const limiter = rateLimiting({
      global: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
      onRejected: ({ request, response, headers }) => {
        assert.equal(request, response);
        if (request.get('x-own') !== '') {
          request.status = 418;
          request.set('retry-after', headers.get('retry-after')!);
          request.body = { error: 'slow down', path: request.path };
        }
      },
    });
    await using(
      start((app, router) => {
        app.use(limiter);
        router.get('/', (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        assert.equal((await get(url)).status, 200);
        const own = await get(url, { 'x-own': '1' });
        assert.equal(own.status, 418);
        assert.deepEqual(JSON.parse(own.body), { error: 'slow down', path: '/' });
        assert.equal(own.headers.get('retry-after'), '60');
        const plain = await get(url);
        assert.equal(plain.status, 429);
        assert.equal(plain.body, 'Too many requests. Try again in 60 seconds.');
      },
    );
  });

  test("onRejected may ctx.throw(): the rejection goes through Koa's error handling, with its headers", async () => {
    const c = clock();
    const limiter = rateLimiting({
      global: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
      onRejected: ({ request, status, headers }) => {
        request.throw(status, 'Slow down', { headers: Object.fromEntries(headers), expose: true });
      },
    });
    const seen: number[] = [];
    await using(
      start((app, router) => {
        app.use(async (_ctx, next) => {
          try {
            await next();
          } catch (error) {
            seen.push((error as { status: number }).status);
            throw error;
          }
        });
        app.use(limiter);
        router.get('/', (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        assert.equal((await get(url)).status, 200);
        const rejected = await get(url);
        assert.deepEqual([rejected.status, rejected.body], [429, 'Slow down']);
        assert.equal(rejected.headers.get('retry-after'), '60');
        assert.match(rejected.headers.get('ratelimit')!, /"global";r=0;t=60/);
        assert.deepEqual(seen, [429], 'an outer middleware saw the error');
      },
    );
  });

  test("a key function that throws: 500 through Koa's error handling, nothing charged or leaked", async () => {
    const slots = concurrency({ permitLimit: 1 });
    const limiter = rateLimiting({
      global: partitioned({
        key: (ctx: Context) => {
          if (ctx.get('x-boom') !== '') throw new Error('bad key');
          return 'k';
        },
        limiter: fixedWindow({ permitLimit: 10, window: '1m' }),
      }),
      policies: { slots },
    });
    await using(
      start((app, router) => {
        app.use(limiter);
        router.get('/', limiter.requirePolicy('slots'), (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url, errors }) => {
        for (let i = 0; i < 3; i++) assert.equal((await get(url, { 'x-boom': '1' })).status, 500);
        assert.equal(errors.length, 3);
        assert.match(String(errors[0]), /bad key/);
        assert.equal(slots.statistics().available, 1, 'no permit leaked');
        assert.equal((await get(url)).status, 200);
        assert.equal((await get(url)).status, 200, 'the permit came back');
      },
    );
  });

  test('an async key is awaited (ctx.state set by an async auth)', async () => {
    const c = clock();
    const limiter = rateLimiting<{ user?: string }>({
      global: partitioned({
        key: async (ctx) => `u:${ctx.state.user ?? 'anon'}`,
        limiter: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
      }),
    });
    await using(
      start((app, router) => {
        app.use(async (ctx, next) => {
          await new Promise((resolve) => setImmediate(resolve));
          ctx.state.user = ctx.get('x-user') || undefined;
          await next();
        });
        app.use(limiter);
        router.get('/', (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url }) => {
        assert.equal((await get(url, { 'x-user': 'a' })).status, 200);
        assert.equal((await get(url, { 'x-user': 'a' })).status, 429);
        assert.equal((await get(url, { 'x-user': 'b' })).status, 200);
      },
    );
  });

  test('app.proxy with maxIpsCount 0 trusts any X-Forwarded-For: clientIp() warns once, naming the fix', async () => {
    resetWarnings();
    const warnings: Array<{ code?: string; message: string }> = [];
    const onWarning = (warning: Error & { code?: string }) => warnings.push(warning);
    process.on('warning', onWarning);
    const limiter = rateLimiting({
      global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
    });
    try {
      await using(
        start((app, router) => {
          app.proxy = true;
          app.use(limiter);
          router.get('/', (ctx) => {
            ctx.body = String(ctx.state.rateLimit?.key);
          });
        }),
        async ({ url }) => {
          const spoofed = await get(url, { 'x-forwarded-for': '198.51.100.7, 203.0.113.1' });
          assert.equal(spoofed.body, '198.51.100.7', 'Koa believes the leftmost entry');
          await get(url, { 'x-forwarded-for': '198.51.100.8' });
          await new Promise((resolve) => setImmediate(resolve));
          const ours = warnings.filter((w) => w.code === 'FLOODGATE_TRUST_ALL_PROXIES');
          assert.equal(ours.length, 1);
          assert.match(ours[0].message, /app\.maxIpsCount/);
        },
      );
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('dryRun: nothing is rejected, onRejected sees ctx with dryRun true, the info says what would have been', async () => {
    const c = clock();
    const seen: string[] = [];
    const limiter = rateLimiting({
      global: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
      dryRun: true,
      onRejected: ({ request, dryRun }) => {
        seen.push(`${request.path} ${dryRun}`);
      },
    });
    await using(
      start((app, router) => {
        app.use(limiter);
        router.get('/', (ctx) => {
          ctx.body = String(ctx.state.rateLimit?.granted);
        });
      }),
      async ({ url }) => {
        const answers = [await get(url), await get(url), await get(url)];
        assert.deepEqual(
          answers.map((a) => [a.status, a.body]),
          [
            [200, 'true'],
            [200, 'false'],
            [200, 'false'],
          ],
        );
        assert.deepEqual(seen, ['/ true', '/ true']);
      },
    );
  });
});
