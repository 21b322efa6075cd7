/**
 * Overhead of HTTP rate limiting: bare framework vs framework + floodgate vs framework + its usual limiter.
 *
 *   npm run bench:http                          # all frameworks, 5 rounds of 5 s, nothing rejected
 *   HOT=1 npm run bench:http                    # one hot key: nearly every request is rejected (429)
 *   ROUNDS=3 DURATION=4 CONNECTIONS=50 FRAMEWORKS=express,hono npm run bench:http
 *
 *   INSTRUCTIONS=1 npm run bench:http           # instructions per request under callgrind (noise-free)
 *   INPROC=1 INSTRUCTIONS=1 npm run bench:http  # the same in process, without sockets: bench/inproc-instructions.ts
 *   BASELINE=/path/to/other/dist INPROC=1 npm run bench:http
 *                                               # adds 'floodgate (baseline)', floodgate built from another
 *                                               # checkout, to compare two versions in one alternating run
 *
 * The no-op contenders show what any middleware (Express, Hono) or `onRequest` hook (Fastify) costs in that
 * framework before it does anything; 'two fields, no limiter' adds the two draft-10 header fields floodgate
 * sends, as constants, and no limiting: the cost of the fields alone. Every limiter keys by client address with a fixed window of one minute; the limit is 10^9 (nothing is
 * rejected) or, with HOT=1, 100 (all load comes from 127.0.0.1, so after the first 100 every answer is a 429).
 * How servers are started, loaded (wrk, else autocannon) and compared: bench/http-runner.ts.
 */
import http from 'node:http';
import { pathToFileURL } from 'node:url';
import type { MiddlewareHandler } from 'hono';
import { built, builtAdapters, listen, runHttpBench, type Variant } from './http-runner.ts';
import { koaVariants } from './koa-apps.ts';
import { nestVariants } from './nestjs-apps.ts';

// Koa's and Nest's rows (their contenders: bench/koa-apps.ts, bench/nestjs-apps.ts) come after the others.
process.env.FRAMEWORKS ??= 'node,express,fastify,hono,koa,nestjs';
const HOT = process.env.HOT === '1';

// The two draft-10 fields floodgate sends, as constants: what sending them costs a framework without any limiter.
const POLICY = '"global";q=1000000000;w=60;pk=:FMmnE8mMBfgjUa2D:';
const LIMIT_FIELD = '"global";r=999999999;t=60;pk=:FMmnE8mMBfgjUa2D:';
const LIMIT = HOT ? 100 : 1_000_000_000;
// 'fields per request, no limiter': the same two fields, `RateLimit` built per request as any limiter must (its
// remaining count changes with every request), with no decision behind it: what correct fields cost at least.
let fieldCount = LIMIT;
const builtField = (): string => `"global";r=${--fieldCount};t=60;pk=:FMmnE8mMBfgjUa2D:`;

async function variants(): Promise<Variant[]> {
  const express = (await import('express')).default;
  const { rateLimit: expressRateLimit } = await import('express-rate-limit');
  const { Hono } = await import('hono');
  const { rateLimiter: honoRateLimiter } = await import('hono-rate-limiter');
  const { createAdaptorServer } = await import('@hono/node-server');
  const Fastify = (await import('fastify')).default;
  const fastifyRateLimit = (await import('@fastify/rate-limit')).default;
  const { RateLimiterMemory } = await import('rate-limiter-flexible');
  const { fixedWindow, partitioned } = await built<typeof import('../src/index.ts')>('index');
  const { clientIp } = await built<typeof import('../src/http/client-ip.ts')>('http/client-ip');
  const floodgate = await builtAdapters();
  const baseline = process.env.BASELINE === undefined ? undefined : await baselineBuild(process.env.BASELINE);

  const global = () =>
    partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: LIMIT, window: '1m' }) });

  const nodeHandler = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  };
  const expressApp = (middleware?: unknown) => {
    const app = express();
    if (middleware) app.use(middleware as never);
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    return http.createServer(app);
  };
  const honoApp = (middleware?: MiddlewareHandler) => {
    const app = new Hono();
    if (middleware) app.use(middleware);
    app.get('/', (c) => c.text('ok'));
    return createAdaptorServer({ fetch: app.fetch }) as http.Server;
  };
  const fastifyApp = async (
    extra: 'none' | 'floodgate' | 'usual' | 'no-op hook' | 'two fields' | 'built fields',
  ) => {
    const app = Fastify();
    if (extra === 'no-op hook') app.addHook('onRequest', (_request, _reply, done) => done());
    if (extra === 'two fields') {
      app.addHook('onRequest', (_request, reply, done) => {
        reply.header('RateLimit-Policy', POLICY);
        reply.header('RateLimit', LIMIT_FIELD);
        done();
      });
    }
    if (extra === 'built fields') {
      app.addHook('onRequest', (_request, reply, done) => {
        reply.header('RateLimit-Policy', POLICY);
        reply.header('RateLimit', builtField());
        done();
      });
    }
    if (extra === 'floodgate') await app.register(floodgate.fastify.rateLimiting, { global: global() });
    if (extra === 'usual') await app.register(fastifyRateLimit, { max: LIMIT, timeWindow: 60_000 });
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    return app.server;
  };
  // node:http has no usual limiter; rate-limiter-flexible is the most used framework-free one, here with what a
  // hand-written integration sends: the same two draft-10 fields (built per request from its answer), and a 429.
  const flexible = new RateLimiterMemory({ points: LIMIT, duration: 60 });
  const flexiblePolicy = `"global";q=${LIMIT};w=60`;
  const flexibleFields = (
    res: http.ServerResponse,
    answer: { remainingPoints: number; msBeforeNext: number },
  ) => {
    res.setHeader('RateLimit-Policy', flexiblePolicy);
    res.setHeader(
      'RateLimit',
      `"global";r=${answer.remainingPoints};t=${Math.ceil(answer.msBeforeNext / 1000)}`,
    );
  };
  const flexibleHandler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    flexible.consume(req.socket.remoteAddress ?? '').then(
      (answer) => {
        flexibleFields(res, answer);
        nodeHandler(req, res);
      },
      (answer) => {
        flexibleFields(res, answer);
        const seconds = String(Math.max(1, Math.ceil(answer.msBeforeNext / 1000)));
        res.writeHead(429, { 'retry-after': seconds, 'content-type': 'text/plain' });
        res.end('Too many requests');
      },
    );
  };

  const baselines: Variant[] =
    baseline === undefined
      ? []
      : [
          {
            framework: 'node',
            name: 'floodgate (baseline)',
            start: () =>
              listen(
                http.createServer(baseline.node.rateLimiting({ global: baseline.global() })(nodeHandler)),
              ),
          },
          {
            framework: 'express',
            name: 'floodgate (baseline)',
            start: () => listen(expressApp(baseline.express.rateLimiting({ global: baseline.global() }))),
          },
          {
            framework: 'fastify',
            name: 'floodgate (baseline)',
            start: async () => {
              const app = Fastify();
              await app.register(baseline.fastify.rateLimiting, { global: baseline.global() });
              app.get('/', async () => 'ok');
              await app.listen({ port: 0, host: '127.0.0.1' });
              return app.server;
            },
          },
          {
            framework: 'hono',
            name: 'floodgate (baseline)',
            start: () => listen(honoApp(baseline.hono.rateLimiting({ global: baseline.global() }))),
          },
        ];

  return [
    ...baselines,
    { framework: 'node', name: 'bare', start: () => listen(http.createServer(nodeHandler)) },
    {
      framework: 'node',
      name: 'two fields, no limiter',
      start: () =>
        listen(
          http.createServer((req, res) => {
            res.setHeader('RateLimit-Policy', POLICY);
            res.setHeader('RateLimit', LIMIT_FIELD);
            nodeHandler(req, res);
          }),
        ),
    },
    {
      framework: 'node',
      name: 'fields per request, no limiter',
      start: () =>
        listen(
          http.createServer((req, res) => {
            res.setHeader('RateLimit-Policy', POLICY);
            res.setHeader('RateLimit', builtField());
            nodeHandler(req, res);
          }),
        ),
    },
    {
      framework: 'node',
      name: 'floodgate',
      start: () => listen(http.createServer(floodgate.node.rateLimiting({ global: global() })(nodeHandler))),
    },
    {
      framework: 'node',
      name: 'floodgate, headers: []',
      start: () =>
        listen(
          http.createServer(floodgate.node.rateLimiting({ global: global(), headers: [] })(nodeHandler)),
        ),
    },
    {
      framework: 'node',
      name: 'flexible + two fields',
      start: () => listen(http.createServer(flexibleHandler)),
    },
    { framework: 'express', name: 'bare', start: () => listen(expressApp()) },
    {
      framework: 'express',
      name: 'no-op middleware',
      start: () => listen(expressApp((_req: unknown, _res: unknown, next: () => void) => next())),
    },
    {
      framework: 'express',
      name: 'two fields, no limiter',
      start: () =>
        listen(
          expressApp((_req: unknown, res: http.ServerResponse, next: () => void) => {
            res.setHeader('RateLimit-Policy', POLICY);
            res.setHeader('RateLimit', LIMIT_FIELD);
            next();
          }),
        ),
    },
    {
      framework: 'express',
      name: 'fields per request, no limiter',
      start: () =>
        listen(
          expressApp((_req: unknown, res: http.ServerResponse, next: () => void) => {
            res.setHeader('RateLimit-Policy', POLICY);
            res.setHeader('RateLimit', builtField());
            next();
          }),
        ),
    },
    {
      framework: 'express',
      name: 'floodgate',
      start: () => listen(expressApp(floodgate.express.rateLimiting({ global: global() }))),
    },
    {
      framework: 'express',
      name: 'express-rate-limit',
      start: () =>
        listen(
          expressApp(
            expressRateLimit({
              windowMs: 60_000,
              limit: LIMIT,
              standardHeaders: 'draft-8',
              legacyHeaders: false,
            }),
          ),
        ),
    },
    { framework: 'fastify', name: 'bare', start: () => fastifyApp('none') },
    { framework: 'fastify', name: 'no-op hook', start: () => fastifyApp('no-op hook') },
    { framework: 'fastify', name: 'two fields, no limiter', start: () => fastifyApp('two fields') },
    {
      framework: 'fastify',
      name: 'fields per request, no limiter',
      start: () => fastifyApp('built fields'),
    },
    { framework: 'fastify', name: 'floodgate', start: () => fastifyApp('floodgate') },
    { framework: 'fastify', name: '@fastify/rate-limit', start: () => fastifyApp('usual') },
    { framework: 'hono', name: 'bare', start: () => listen(honoApp()) },
    { framework: 'hono', name: 'no-op middleware', start: () => listen(honoApp((_c, next) => next())) },
    {
      framework: 'hono',
      name: 'two fields, no limiter',
      start: () =>
        listen(
          honoApp((c, next) => {
            // As floodgate does under node-server: on the node response, which keeps node-server's fast path.
            const outgoing = (c.env as { outgoing: http.ServerResponse }).outgoing;
            outgoing.setHeader('RateLimit-Policy', POLICY);
            outgoing.setHeader('RateLimit', LIMIT_FIELD);
            return next();
          }),
        ),
    },
    {
      framework: 'hono',
      name: 'fields per request, no limiter',
      start: () =>
        listen(
          honoApp((c, next) => {
            const outgoing = (c.env as { outgoing: http.ServerResponse }).outgoing;
            outgoing.setHeader('RateLimit-Policy', POLICY);
            outgoing.setHeader('RateLimit', builtField());
            return next();
          }),
        ),
    },
    {
      framework: 'hono',
      name: 'floodgate',
      start: () => listen(honoApp(floodgate.hono.rateLimiting({ global: global() }))),
    },
    {
      framework: 'hono',
      name: 'hono-rate-limiter',
      start: () =>
        listen(
          honoApp(
            honoRateLimiter({
              windowMs: 60_000,
              limit: LIMIT,
              standardHeaders: 'draft-7',
              keyGenerator: (c) =>
                (c.env as { incoming?: http.IncomingMessage }).incoming?.socket.remoteAddress ?? '',
            }),
          ),
        ),
    },
    ...(await koaVariants(LIMIT)),
    ...(await nestVariants(LIMIT)),
  ];
}

/** floodgate built in another checkout (`BASELINE` is its dist/ directory). */
async function baselineBuild(dist: string) {
  const from = <T>(path: string) => import(pathToFileURL(`${dist}/${path}.js`).href) as Promise<T>;
  const { fixedWindow, partitioned } = await from<typeof import('../src/index.ts')>('index');
  const { clientIp } = await from<typeof import('../src/http/client-ip.ts')>('http/client-ip');
  return {
    global: () =>
      partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: LIMIT, window: '1m' }) }),
    node: await from<typeof import('../src/adapters/node/index.ts')>('adapters/node/index'),
    express: await from<typeof import('../src/adapters/express/index.ts')>('adapters/express/index'),
    hono: await from<typeof import('../src/adapters/hono/index.ts')>('adapters/hono/index'),
    fastify: await from<typeof import('../src/adapters/fastify/index.ts')>('adapters/fastify/index'),
  };
}

const run = {
  file: import.meta.url,
  variants,
  title: HOT ? 'HOT KEY (limit 100/min, nearly all rejected)' : 'nothing rejected (limit 10^9/min)',
  expectRejections: HOT,
};
// Imported here, not above: the in-process instruction count is a mode of this bench alone.
const instructions = () => import('./inproc-instructions.ts');
if (process.argv[2] === '--inproc-child') {
  await (await instructions()).inProcessChild(run, process.argv[3], process.argv[4]);
} else if (process.env.INPROC === '1' && process.env.INSTRUCTIONS === '1') {
  await (await instructions()).inProcessInstructions(run);
} else await runHttpBench(run);
