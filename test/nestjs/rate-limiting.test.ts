/**
 * floodgate/nestjs over real sockets through Nest 11 on the Express platform: 429 as an HttpException with body,
 * Retry-After and the RateLimit fields per algorithm; global guard + controller guard + @RateLimit decided once
 * (@nestjs/throttler #1365 cannot happen); @NoRateLimit; per-user keys from a Passport-style guard; a
 * concurrency queue in both orders; exception filters see the rejection; a throwing key; forRootAsync.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type ArgumentsHost,
  Catch,
  type ExceptionFilter,
  type ExecutionContext,
  Injectable,
  type ModuleMetadata,
  UseGuards,
} from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import {
  clientIp,
  FloodgateGuard,
  FloodgateModule,
  NoRateLimit,
  RateLimit,
  RateLimitExceededException,
} from '../../src/adapters/nestjs/index.ts';
import { concurrency, fixedWindow, partitioned, slidingWindow, tokenBucket } from '../../src/index.ts';
import { clock, gate, get, until } from '../koa/app.ts';
import { controller, platforms, start as startOn, using } from './app.ts';

const guard = { provide: APP_GUARD, useClass: FloodgateGuard };
type PlatformRequest = { headers: Record<string, string | string[] | undefined>; user?: { id: string } };
const reqOf = (context: ExecutionContext) => context.switchToHttp().getRequest<PlatformRequest>();
const header = (context: ExecutionContext, name: string) => {
  const value = reqOf(context).headers[name];
  return typeof value === 'string' ? value : undefined;
};

for (const platform of platforms) {
  describe(`Nest rateLimiting (${platform} platform)`, () => {
    const start = (metadata: ModuleMetadata) => startOn(platform, metadata);
    test('429 as an HttpException: JSON body, Retry-After and RateLimit fields, per algorithm', async () => {
      const c = clock();
      const fixed = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      const sliding = slidingWindow({ permitLimit: 2, window: '10s', segmentsPerWindow: 5, clock: c });
      const bucket = tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: '3s', clock: c });
      const Api = controller({
        '/fixed': [() => 'ok', RateLimit('fixed')],
        '/sliding': [() => 'ok', RateLimit('sliding')],
        '/bucket': [() => 'ok', RateLimit('bucket')],
      });
      await using(
        start({
          imports: [FloodgateModule.forRoot({ policies: { fixed, sliding, bucket } })],
          controllers: [Api],
          providers: [guard],
        }),
        async ({ url }) => {
          const first = await get(`${url}/fixed`);
          assert.deepEqual([first.status, first.body], [200, 'ok']);
          assert.match(first.headers.get('ratelimit-policy')!, /"fixed";q=1;w=10/);
          c.t = 4_000;
          const f = await get(`${url}/fixed`);
          assert.equal(f.status, 429);
          assert.equal(f.headers.get('retry-after'), '6');
          assert.match(f.headers.get('ratelimit')!, /"fixed";r=0;t=6/);
          assert.deepEqual(JSON.parse(f.body), {
            statusCode: 429,
            message: 'Too many requests. Try again in 6 seconds.',
          });
          c.t = 0;
          await get(`${url}/sliding`);
          c.t = 4_500;
          await get(`${url}/sliding`);
          const s = await get(`${url}/sliding`);
          assert.deepEqual([s.status, s.headers.get('retry-after')], [429, '6']);
          c.t = 4_000;
          await get(`${url}/bucket`);
          c.t = 5_000;
          const b = await get(`${url}/bucket`);
          assert.deepEqual([b.status, b.headers.get('retry-after')], [429, '1']);
        },
      );
    });

    test('a global guard, a controller guard and @RateLimit: one decision per request, a rejection burns nothing', async () => {
      const c = clock();
      const global = fixedWindow({ permitLimit: 3, window: '10s', clock: c });
      const tight = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      let keyCalls = 0;
      const keyed = partitioned({
        key: (context: ExecutionContext) => {
          keyCalls++;
          return header(context, 'x-client') ?? 'anon';
        },
        limiter: fixedWindow({ permitLimit: 100, window: '10s', clock: c }),
      });
      const Api = controller(
        {
          '/tight': [() => 'ok', RateLimit('tight')],
          '/keyed': [() => 'ok', RateLimit('keyed')],
          '/open': [() => 'open', NoRateLimit()],
          '/': [() => 'home'],
        },
        UseGuards(FloodgateGuard),
      );
      await using(
        start({
          imports: [FloodgateModule.forRoot({ global, policies: { tight, keyed } })],
          controllers: [Api],
          providers: [guard],
        }),
        async ({ url }) => {
          assert.equal((await get(`${url}/`)).status, 200);
          assert.equal(global.statistics().available, 2, 'two guards, one global permit');
          assert.equal((await get(`${url}/tight`)).status, 200);
          assert.equal((await get(`${url}/tight`)).status, 429);
          assert.equal(global.statistics().available, 1, 'the rejected request took no global permit');
          assert.equal((await get(`${url}/keyed`)).status, 200);
          assert.equal(keyCalls, 1, 'the key function ran once');
          assert.equal(global.statistics().available, 0);
          for (let i = 0; i < 3; i++) assert.equal((await get(`${url}/open`)).status, 200);
          const over = await get(`${url}/`);
          assert.equal(over.status, 429);
          assert.match(over.headers.get('ratelimit')!, /^"global";r=0/);
        },
      );
    });

    test('@NoRateLimit() on a controller; a handler @RateLimit() overrides it', async () => {
      const c = clock();
      const global = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      const tight = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      const Api = controller(
        { '/free': [() => 'free'], '/tight': [() => 'ok', RateLimit('tight')] },
        NoRateLimit(),
      );
      await using(
        start({
          imports: [FloodgateModule.forRoot({ global, policies: { tight } })],
          controllers: [Api],
          providers: [guard],
        }),
        async ({ url }) => {
          for (let i = 0; i < 3; i++) assert.equal((await get(`${url}/free`)).status, 200);
          assert.equal(global.statistics().available, 1);
          assert.equal((await get(`${url}/tight`)).status, 200);
          assert.equal((await get(`${url}/tight`)).status, 429);
        },
      );
    });

    test('per-user keys from req.user set by an auth guard that runs first; the address otherwise', async () => {
      const c = clock();
      const ip = clientIp();
      class Auth {
        canActivate(context: ExecutionContext): boolean {
          const req = reqOf(context);
          const user = header(context, 'x-user');
          if (user) req.user = { id: user };
          return true;
        }
      }
      Injectable()(Auth);
      const Api = controller({ '/': [(() => 'ok') as () => unknown] });
      await using(
        start({
          imports: [
            FloodgateModule.forRoot({
              global: partitioned({
                key: (context: ExecutionContext) => {
                  const user = reqOf(context).user;
                  return user ? `user:${user.id}` : ip(context);
                },
                limiter: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
              }),
            }),
          ],
          controllers: [Api],
          providers: [{ provide: APP_GUARD, useClass: Auth }, guard],
        }),
        async ({ url }) => {
          assert.equal((await get(url, { 'x-user': 'alice' })).status, 200);
          assert.equal((await get(url, { 'x-user': 'alice' })).status, 429);
          assert.equal((await get(url, { 'x-user': 'bob' })).status, 200);
          assert.equal((await get(url)).status, 200, 'by address');
          assert.equal((await get(url)).status, 429);
        },
      );
    });

    for (const queueOrder of ['oldest-first', 'newest-first'] as const) {
      test(`a concurrency queue admits ${queueOrder}; the permit comes back when the response is written`, async () => {
        const slots = concurrency({ permitLimit: 1, queueLimit: 2, queueOrder });
        const holder = gate();
        const admitted: string[] = [];
        const Api = controller({
          '/slow': [
            async (req: unknown) => {
              const name = String((req as { query: Record<string, string> }).query.name);
              admitted.push(name);
              if (name === 'holder') await holder.promise;
              return name;
            },
            RateLimit('slots'),
            // The handler's first parameter is the request.
            ((target: object, key: string) => {
              Reflect.defineMetadata(
                '__routeArguments__',
                { '0:0': { index: 0, data: undefined, pipes: [] } },
                target.constructor,
                key,
              );
            }) as never,
          ],
        });
        await using(
          start({
            imports: [FloodgateModule.forRoot({ policies: { slots } })],
            controllers: [Api],
            providers: [guard],
          }),
          async ({ url }) => {
            const first = get(`${url}/slow?name=holder`);
            await until(() => admitted.length === 1, 'the holder');
            const a = get(`${url}/slow?name=a`);
            await until(() => slots.statistics().queued === 1, 'a queued');
            const b = get(`${url}/slow?name=b`);
            await until(() => slots.statistics().queued === 2, 'b queued');
            const c = get(`${url}/slow?name=c`);
            if (queueOrder === 'oldest-first') assert.equal((await c).status, 429);
            else assert.equal((await a).status, 429);
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
            await until(() => slots.statistics().available === 1, 'the permit back');
          },
        );
      });
    }

    test("the app's exception filter sees the rejection, with its headers and lease", async () => {
      const c = clock();
      const stackTraceLimit = Error.stackTraceLimit;
      const seen: Array<{
        policy: string | undefined;
        retry: string | null;
        ms: number | undefined;
        frames: number;
      }> = [];
      class Filter implements ExceptionFilter {
        catch(exception: RateLimitExceededException, host: ArgumentsHost): void {
          seen.push({
            policy: exception.policy,
            retry: exception.headers.get('retry-after'),
            ms: exception.lease.retryAfterMs,
            // A 429 is an answer, not a fault: no stack trace captured (it cost most of a rejection).
            frames: (exception.stack ?? '').split('\n').filter((line) => line.trim().startsWith('at '))
              .length,
          });
          host
            .switchToHttp()
            .getResponse<{ status(code: number): { send(body: unknown): void } }>()
            .status(exception.getStatus())
            .send({ error: 'slow down' });
        }
      }
      Catch(RateLimitExceededException)(Filter);
      const Api = controller({ '/': [() => 'ok', RateLimit('tight')] });
      await using(
        start({
          imports: [
            FloodgateModule.forRoot({
              policies: { tight: fixedWindow({ permitLimit: 1, window: '1m', clock: c }) },
            }),
          ],
          controllers: [Api],
          providers: [guard, { provide: APP_FILTER, useClass: Filter }],
        }),
        async ({ url }) => {
          assert.equal((await get(url)).status, 200);
          const rejected = await get(url);
          assert.deepEqual([rejected.status, JSON.parse(rejected.body)], [429, { error: 'slow down' }]);
          assert.equal(rejected.headers.get('retry-after'), '60');
          assert.deepEqual(seen, [{ policy: 'tight', retry: '60', ms: 60_000, frames: 0 }]);
          assert.equal(Error.stackTraceLimit, stackTraceLimit, 'the stack trace limit is restored');
        },
      );
    });

    test('a key function that throws: 500 through Nest, nothing charged or leaked', async () => {
      const slots = concurrency({ permitLimit: 1 });
      const Api = controller({ '/': [() => 'ok', RateLimit('slots')] });
      await using(
        start({
          imports: [
            FloodgateModule.forRoot({
              global: partitioned({
                key: (context: ExecutionContext) => {
                  if (header(context, 'x-boom')) throw new Error('bad key');
                  return 'k';
                },
                limiter: fixedWindow({ permitLimit: 10, window: '1m' }),
              }),
              policies: { slots },
            }),
          ],
          controllers: [Api],
          providers: [guard],
        }),
        async ({ url }) => {
          for (let i = 0; i < 3; i++) assert.equal((await get(url, { 'x-boom': '1' })).status, 500);
          assert.equal(slots.statistics().available, 1, 'no permit leaked');
          assert.equal((await get(url)).status, 200);
          await until(() => slots.statistics().available === 1, 'the permit back');
          assert.equal((await get(url)).status, 200);
        },
      );
    });

    test('forRootAsync: options from a factory with an injected provider', async () => {
      const c = clock();
      const LIMIT = Symbol('limit');
      const Api = controller({ '/': [() => 'ok'] });
      class Config {}
      const ConfigModule = { module: Config, providers: [{ provide: LIMIT, useValue: 2 }], exports: [LIMIT] };
      await using(
        start({
          imports: [
            FloodgateModule.forRootAsync({
              imports: [ConfigModule],
              inject: [LIMIT],
              useFactory: async (limit: number) => ({
                global: fixedWindow({ permitLimit: limit, window: '1m', clock: c }),
              }),
            }),
          ],
          controllers: [Api],
          providers: [guard],
        }),
        async ({ url }) => {
          const statuses = [];
          for (let i = 0; i < 3; i++) statuses.push((await get(url)).status);
          assert.deepEqual(statuses, [200, 200, 429]);
        },
      );
    });

    test('a @RateLimit() naming a policy that does not exist fails the start, naming the handler', async () => {
      const Api = controller({ '/': [() => 'ok', RateLimit('logn')] });
      await assert.rejects(
        start({
          imports: [
            FloodgateModule.forRoot({ policies: { login: fixedWindow({ permitLimit: 1, window: '1m' }) } }),
          ],
          controllers: [Api],
          providers: [guard],
        }),
        /@RateLimit\(\) on Routes\.r0__: no rate-limiting policy named "logn" \(known: "login"\)/,
      );
    });

    test("body: 'problem+json' makes the exception's response the RFC 9457 document; dryRun lets it through", async () => {
      const c = clock();
      const Api = controller({ '/': [() => 'ok'] });
      await using(
        start({
          imports: [
            FloodgateModule.forRoot({
              global: fixedWindow({ permitLimit: 1, window: '1m', clock: c }),
              body: 'problem+json',
            }),
          ],
          controllers: [Api],
          providers: [guard],
        }),
        async ({ url }) => {
          assert.equal((await get(url)).status, 200);
          const rejected = await get(url);
          assert.equal(rejected.status, 429);
          const problem = JSON.parse(rejected.body);
          assert.equal(problem.status, 429);
          assert.match(String(problem.type), /quota/);
          assert.equal(rejected.headers.get('retry-after'), '60');
        },
      );
      const Dry = controller({ '/dry': [() => 'dry', RateLimit('dry')] });
      const dry = fixedWindow({ permitLimit: 1, window: '1m', clock: c });
      const seen: boolean[] = [];
      await using(
        start({
          imports: [
            FloodgateModule.forRoot({
              policies: { dry },
              dryRun: true,
              onRejected: ({ dryRun }) => {
                seen.push(dryRun);
              },
            }),
          ],
          controllers: [Dry],
          providers: [guard],
        }),
        async ({ url }) => {
          for (let i = 0; i < 3; i++) assert.equal((await get(`${url}/dry`)).status, 200);
          assert.deepEqual(seen, [true, true]);
        },
      );
    });
  });
}
