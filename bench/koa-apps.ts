/**
 * The Koa contenders shared by bench:koa and bench:http: bare Koa, a no-op middleware, the two draft-10 fields as
 * constants, floodgate, koa-ratelimit (memory driver), all keyed by `ctx.ip` with a fixed window of one minute.
 */
import http from 'node:http';
import { createRequire } from 'node:module';
import type { Middleware } from 'koa';
import { built, listen, type Variant } from './http-runner.ts';

const POLICY = '"global";q=1000000000;w=60;pk=:FMmnE8mMBfgjUa2D:';
const LIMIT_FIELD = '"global";r=999999999;t=60;pk=:FMmnE8mMBfgjUa2D:';

type KoaRateLimit = (options: {
  driver: 'memory';
  db: Map<unknown, unknown>;
  duration: number;
  max: number;
  id: (ctx: { ip: string }) => string;
}) => Middleware;

/** The Koa contenders of `bench:koa` and `bench:http`, every limiter at `limit` requests a minute. */
export async function koaVariants(limit: number): Promise<Variant[]> {
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
    partitioned({ key: floodgate.clientIp(), limiter: fixedWindow({ permitLimit: limit, window: '1m' }) });

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
              max: limit,
              id: (ctx) => ctx.ip,
            }),
          ),
        ),
    },
  ];
}
