/**
 * Overhead of HTTP rate limiting: bare framework vs framework + floodgate vs framework + its usual limiter.
 *
 *   npm run bench:http                          # all frameworks, 5 rounds of 5 s, nothing rejected
 *   HOT=1 npm run bench:http                    # one hot key: nearly every request is rejected (429)
 *   ROUNDS=3 DURATION=4 CONNECTIONS=50 FRAMEWORKS=express,hono npm run bench:http
 *
 * Every limiter keys by client address with a fixed window of one minute; the limit is 10^9 (nothing is
 * rejected) or, with HOT=1, 100 (all load comes from 127.0.0.1, so after the first 100 every answer is a 429).
 * Each server runs in its own child process on a free loopback port, so autocannon (in this process) and the
 * server do not share a core. Contenders run in alternation, round after round; medians of requests/s and of
 * server CPU per request are compared to the bare framework.
 */
import { type ChildProcess, fork } from 'node:child_process';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { MiddlewareHandler } from 'hono';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (options: {
  url: string;
  connections: number;
  duration: number;
  pipelining: number;
}) => Promise<{
  requests: { average: number; total: number };
  non2xx: number;
  errors: number;
  '2xx': number;
}>;

const HOT = process.env.HOT === '1';
const LIMIT = HOT ? 100 : 1_000_000_000;

type Variant = { framework: string; name: string; start: () => Promise<http.Server> };

function listen(server: http.Server): Promise<http.Server> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function variants(): Promise<Variant[]> {
  const express = (await import('express')).default;
  const { rateLimit: expressRateLimit } = await import('express-rate-limit');
  const { Hono } = await import('hono');
  const { rateLimiter: honoRateLimiter } = await import('hono-rate-limiter');
  const { createAdaptorServer } = await import('@hono/node-server');
  const Fastify = (await import('fastify')).default;
  const fastifyRateLimit = (await import('@fastify/rate-limit')).default;
  const { RateLimiterMemory } = await import('rate-limiter-flexible');
  const { fixedWindow, partitioned } = await import('../src/index.ts');
  const { clientIp } = await import('../src/http/client-ip.ts');
  const floodgateNode = await import('../src/adapters/node/index.ts');
  const floodgateExpress = await import('../src/adapters/express/index.ts');
  const floodgateHono = await import('../src/adapters/hono/index.ts');
  const floodgateFastify = await import('../src/adapters/fastify/index.ts');

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
  const fastifyApp = async (extra: 'none' | 'floodgate' | 'usual') => {
    const app = Fastify();
    if (extra === 'floodgate') await app.register(floodgateFastify.rateLimiting, { global: global() });
    if (extra === 'usual') await app.register(fastifyRateLimit, { max: LIMIT, timeWindow: 60_000 });
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    return app.server;
  };
  // node:http has no usual limiter; rate-limiter-flexible is the most used framework-free one.
  const flexible = new RateLimiterMemory({ points: LIMIT, duration: 60 });
  const flexibleHandler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    flexible.consume(req.socket.remoteAddress ?? '').then(
      () => nodeHandler(req, res),
      () => {
        res.writeHead(429, { 'retry-after': '60' });
        res.end('Too many requests');
      },
    );
  };

  return [
    { framework: 'node', name: 'bare', start: () => listen(http.createServer(nodeHandler)) },
    {
      framework: 'node',
      name: 'floodgate',
      start: () => listen(http.createServer(floodgateNode.rateLimiting({ global: global() })(nodeHandler))),
    },
    {
      framework: 'node',
      name: 'floodgate, headers: []',
      start: () =>
        listen(http.createServer(floodgateNode.rateLimiting({ global: global(), headers: [] })(nodeHandler))),
    },
    {
      framework: 'node',
      name: 'rate-limiter-flexible',
      start: () => listen(http.createServer(flexibleHandler)),
    },
    { framework: 'express', name: 'bare', start: () => listen(expressApp()) },
    {
      framework: 'express',
      name: 'floodgate',
      start: () => listen(expressApp(floodgateExpress.rateLimiting({ global: global() }))),
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
    { framework: 'fastify', name: 'floodgate', start: () => fastifyApp('floodgate') },
    { framework: 'fastify', name: '@fastify/rate-limit', start: () => fastifyApp('usual') },
    { framework: 'hono', name: 'bare', start: () => listen(honoApp()) },
    {
      framework: 'hono',
      name: 'floodgate',
      start: () => listen(honoApp(floodgateHono.rateLimiting({ global: global() }))),
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
  ];
}

// ---- child: serve one variant and report its port ----
if (process.argv[2] === '--serve') {
  const [framework, name] = process.argv.slice(3);
  const variant = (await variants()).find((v) => v.framework === framework && v.name === name)!;
  const server = await variant.start();
  process.on('message', () => {
    const { user, system } = process.cpuUsage();
    process.send!({ cpu: user + system });
  });
  process.send!({ port: (server.address() as AddressInfo).port });
} else {
  await main();
}

async function main(): Promise<void> {
  const rounds = Number(process.env.ROUNDS ?? 5);
  const duration = Number(process.env.DURATION ?? 5);
  const connections = Number(process.env.CONNECTIONS ?? 50);
  const frameworks = (process.env.FRAMEWORKS ?? 'node,express,fastify,hono').split(',');
  const chosen = (await variants()).filter((v) => frameworks.includes(v.framework));
  const children: ChildProcess[] = [];
  const ports = new Map<Variant, number>();
  try {
    for (const v of chosen) {
      const child = fork(fileURLToPath(import.meta.url), ['--serve', v.framework, v.name], {
        execArgv: ['--import', 'tsx'],
        stdio: 'inherit',
      });
      children.push(child);
      ports.set(
        v,
        await new Promise<number>((resolve) =>
          child.once('message', (m: { port: number }) => resolve(m.port)),
        ),
      );
    }
    const samples = new Map<Variant, number[]>(chosen.map((v) => [v, []]));
    const cpu = new Map<Variant, number[]>(chosen.map((v) => [v, []]));
    const rejected = new Map<Variant, number>(chosen.map((v) => [v, 0]));
    const childOf = new Map(chosen.map((v, i) => [v, children[i]]));
    for (const v of chosen) await load(ports.get(v)!, 1, connections); // warm-up (and, HOT=1, spend the limit)
    for (let round = 0; round < rounds; round++) {
      for (const framework of frameworks) {
        const group = chosen.filter((v) => v.framework === framework);
        for (let i = 0; i < group.length; i++) {
          const v = group[(i + round) % group.length];
          const child = childOf.get(v)!;
          const before = await cpuOf(child);
          const result = await load(ports.get(v)!, duration, connections);
          samples.get(v)!.push(result.perSecond);
          rejected.set(v, rejected.get(v)! + result.non2xx);
          cpu.get(v)!.push(((await cpuOf(child)) - before) / result.total);
        }
      }
      process.stderr.write(`round ${round + 1}/${rounds} done\n`);
    }
    console.log(
      `\n${HOT ? 'HOT KEY (limit 100/min, nearly all rejected)' : 'nothing rejected (limit 10^9/min)'}: requests/s, ` +
        `median of ${rounds} alternating rounds of ${duration} s, ${connections} connections, ` +
        `Node ${process.version}, ${(await import('node:os')).cpus().length} CPUs`,
    );
    console.log('framework contender                  req/s   % of bare   server CPU µs/req   non-2xx');
    for (const framework of frameworks) {
      const group = chosen.filter((v) => v.framework === framework);
      const bare = median(samples.get(group.find((v) => v.name === 'bare')!)!);
      for (const v of group) {
        const m = median(samples.get(v)!);
        console.log(
          `${framework.padEnd(9)} ${v.name.padEnd(23)} ${m.toFixed(0).padStart(8)} ${((100 * m) / bare).toFixed(1).padStart(9)} %` +
            ` ${median(cpu.get(v)!).toFixed(1).padStart(13)} µs ${String(rejected.get(v)).padStart(12)}`,
        );
      }
    }
  } finally {
    for (const child of children) child.kill();
  }
}

async function load(
  port: number,
  duration: number,
  connections: number,
): Promise<{ perSecond: number; total: number; non2xx: number }> {
  const result = await autocannon({ url: `http://127.0.0.1:${port}/`, connections, duration, pipelining: 1 });
  if (result.errors > 0 || (!HOT && result.non2xx > 0)) {
    throw new Error(`port ${port}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  }
  return { perSecond: result.requests.average, total: result.requests.total, non2xx: result.non2xx };
}

function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (m: { cpu: number }) => resolve(m.cpu));
    child.send('cpu');
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
