/**
 * Overhead of rate limiting on Koa: bare Koa vs Koa + floodgate vs Koa + koa-ratelimit (memory driver).
 *
 *   INPROC=1 npm run bench:koa                  # CPU per request in process (no sockets): the figure in docs/koa.md
 *   HOT=1 INPROC=1 npm run bench:koa            # one hot key: nearly every request is rejected (429)
 *   npm run bench:koa                           # over loopback with wrk (else autocannon), 5 rounds of 5 s
 *
 * The no-op contender shows what any Koa middleware costs before it does anything; 'two fields, no limiter'
 * sets the two draft-10 header fields floodgate sends, as constants, with no limiting. Both limiters key by
 * client address (`ctx.ip`) with a fixed window of one minute; the limit is 10^9 (nothing is rejected) or, with
 * HOT=1, 100. koa-ratelimit sends its three X-RateLimit-* fields. How servers are run and compared:
 * bench/http-runner.ts (shared with bench:http).
 */
import http from 'node:http';
import { createRequire } from 'node:module';
import type { Middleware } from 'koa';
import { built, listen, runHttpBench, type Variant } from './http-runner.ts';

process.env.FRAMEWORKS ??= 'koa';
const HOT = process.env.HOT === '1';
const POLICY = '"global";q=1000000000;w=60;pk=:FMmnE8mMBfgjUa2D:';
const LIMIT_FIELD = '"global";r=999999999;t=60;pk=:FMmnE8mMBfgjUa2D:';
const LIMIT = HOT ? 100 : 1_000_000_000;

type KoaRateLimit = (options: {
  driver: 'memory';
  db: Map<unknown, unknown>;
  duration: number;
  max: number;
  id: (ctx: { ip: string }) => string;
}) => Middleware;

async function variants(): Promise<Variant[]> {
  const Koa = (await import('koa')).default;
  const koaRateLimit = createRequire(import.meta.url)('koa-ratelimit') as KoaRateLimit;
  const { fixedWindow, partitioned } = await built<typeof import('../src/index.ts')>('index');
  const floodgate = await built<typeof import('../src/adapters/koa/index.ts')>('adapters/koa/index');

  const koaApp = (middleware?: Middleware) => {
    const app = new Koa();
    if (middleware) app.use(middleware);
    app.use((ctx) => {
      ctx.body = 'ok';
    });
    return http.createServer(app.callback());
  };
  const global = () =>
    partitioned({ key: floodgate.clientIp(), limiter: fixedWindow({ permitLimit: LIMIT, window: '1m' }) });

  return [
    { framework: 'koa', name: 'bare', start: () => listen(koaApp()) },
    { framework: 'koa', name: 'no-op middleware', start: () => listen(koaApp((_ctx, next) => next())) },
    {
      framework: 'koa',
      name: 'two fields, no limiter',
      start: () =>
        listen(
          koaApp((ctx, next) => {
            ctx.set('RateLimit-Policy', POLICY);
            ctx.set('RateLimit', LIMIT_FIELD);
            return next();
          }),
        ),
    },
    {
      framework: 'koa',
      name: 'floodgate',
      start: () => listen(koaApp(floodgate.rateLimiting({ global: global() }) as unknown as Middleware)),
    },
    {
      framework: 'koa',
      name: 'koa-ratelimit (memory)',
      start: () =>
        listen(
          koaApp(
            koaRateLimit({
              driver: 'memory',
              db: new Map(),
              duration: 60_000,
              max: LIMIT,
              id: (ctx) => ctx.ip,
            }),
          ),
        ),
    },
  ];
}

await runHttpBench({
  file: import.meta.url,
  variants,
  title: `Koa, ${HOT ? 'HOT KEY (limit 100/min, nearly all rejected)' : 'nothing rejected (limit 10^9/min)'}`,
  expectRejections: HOT,
});
