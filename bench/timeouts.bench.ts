/**
 * Overhead of the request-timeouts middleware on requests that finish in time.
 *
 *   npm run bench:timeouts                       # all frameworks, 5 rounds of 5 s
 *   ROUNDS=3 DURATION=4 CONNECTIONS=50 FRAMEWORKS=express,hono npm run bench:timeouts
 *   PROFILE=0 (skip the profile) · PROFILE_DURATION=5 · PROFILE_DETAIL=1 (floodgate's top functions)
 *
 * How servers are started, loaded (wrk, else autocannon) and compared, and INSTRUCTIONS=1 (instructions per
 * request under callgrind): bench/http-runner.ts. A micro-benchmark of the deadline bookkeeping itself (the
 * shared deadline list against a `setTimeout` per request) comes first. The `no-op` contenders show what any
 * middleware (Express, Hono) or `onRequest` hook (Fastify) costs in that framework, before it does anything.
 */
import http from 'node:http';
import { createRequire } from 'node:module';
import type { MiddlewareHandler } from 'hono';
import {
  built,
  builtAdapters,
  inject,
  type Listener,
  listen,
  load,
  loadGenerator,
  median,
  runHttpBench,
  startServer,
  type Variant,
} from './http-runner.ts';

// connect-timeout ships no types; this is the part used here.
const require = createRequire(import.meta.url);
const connectTimeout = require('connect-timeout') as (time: string) => unknown;

const TIMEOUT_MS = 10_000;

async function variants(): Promise<Variant[]> {
  const express = (await import('express')).default;
  const { Hono } = await import('hono');
  const { timeout: honoTimeout } = await import('hono/timeout');
  const { createAdaptorServer } = await import('@hono/node-server');
  const Fastify = (await import('fastify')).default;
  const floodgate = await builtAdapters();

  const nodeHandler = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  };
  const expressApp = (middleware?: (req: never, res: never, next: () => void) => void) => {
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
  const fastifyApp = async (extra: 'none' | 'floodgate' | 'no-op hook') => {
    const app = Fastify();
    if (extra === 'floodgate') await app.register(floodgate.fastify.requestTimeouts, { default: TIMEOUT_MS });
    if (extra === 'no-op hook') app.addHook('onRequest', (_request, _reply, done) => done());
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    return app.server;
  };

  return [
    { framework: 'node', name: 'bare', start: () => listen(http.createServer(nodeHandler)) },
    {
      framework: 'node',
      name: 'floodgate',
      start: () =>
        listen(http.createServer(floodgate.node.requestTimeouts({ default: TIMEOUT_MS })(nodeHandler))),
    },
    { framework: 'express', name: 'bare', start: () => listen(expressApp()) },
    {
      framework: 'express',
      name: 'no-op middleware',
      start: () => listen(expressApp((_req, _res, next) => next())),
    },
    {
      framework: 'express',
      name: 'floodgate',
      start: () => listen(expressApp(floodgate.express.requestTimeouts({ default: TIMEOUT_MS }) as never)),
    },
    {
      framework: 'express',
      name: 'connect-timeout',
      start: () => listen(expressApp(connectTimeout('10s') as never)),
    },
    { framework: 'fastify', name: 'bare', start: () => fastifyApp('none') },
    { framework: 'fastify', name: 'no-op hook', start: () => fastifyApp('no-op hook') },
    { framework: 'fastify', name: 'floodgate', start: () => fastifyApp('floodgate') },
    { framework: 'hono', name: 'bare', start: () => listen(honoApp()) },
    {
      framework: 'hono',
      name: 'no-op middleware',
      start: () => listen(honoApp((_c, next) => next())),
    },
    {
      framework: 'hono',
      name: 'floodgate',
      start: () => listen(honoApp(floodgate.hono.requestTimeouts({ default: TIMEOUT_MS }))),
    },
    { framework: 'hono', name: 'hono/timeout', start: () => listen(honoApp(honoTimeout(TIMEOUT_MS))) },
  ];
}

const measuring =
  process.argv[2] !== '--serve' && process.env.INSTRUCTIONS !== '1' && process.env.INPROC !== '1';
if (measuring) await micro();
await runHttpBench({ file: import.meta.url, variants, title: 'requests that finish in time' });
// After the in-time table: in one process, running the burst of timeouts first slowed every Hono contender of
// the in-time table that followed (bare too) by 3–4×.
if (process.argv[2] !== '--serve' && process.env.INSTRUCTIONS !== '1' && process.env.TIMED_OUT !== '0') {
  await timedOutCost();
}
if (measuring && process.env.PROFILE !== '0') {
  const frameworks = (process.env.FRAMEWORKS ?? 'node,express,fastify,hono').split(',');
  await profile(frameworks, Number(process.env.PROFILE_DURATION ?? 5), Number(process.env.CONNECTIONS ?? 50));
}

/**
 * The share of the server's CPU samples spent in floodgate's code (and the Node internals it calls), under the
 * same load. A ratio within one process, so it holds on a machine too busy for requests/s to.
 */
async function profile(frameworks: string[], duration: number, connections: number): Promise<void> {
  const { mkdtempSync, readdirSync, readFileSync, statSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  console.log(`\nfloodgate's share of server CPU, from --cpu-prof under ${duration} s of load:`);
  const generator = loadGenerator();
  for (const framework of frameworks) {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-prof-'));
    const { child, port } = await startServer(import.meta.url, framework, 'floodgate', [
      '--cpu-prof',
      '--cpu-prof-dir',
      dir,
    ]);
    await load(generator, port, 1, connections);
    await load(generator, port, duration, connections);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.send('exit');
    await exited;
    // tsx runs a loader thread that writes its own profile; the server's is the largest.
    const file = readdirSync(dir)
      .map((f) => join(dir, f))
      .sort((a, b) => statSync(b).size - statSync(a).size)[0];
    const share = floodgateShare(JSON.parse(readFileSync(file, 'utf8')));
    console.log(`${framework.padEnd(9)} ${(100 * share).toFixed(2)} % of busy samples`);
  }
}

interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { url: string; functionName: string }; children?: number[] }>;
  samples: number[];
  timeDeltas: number[];
}

function floodgateShare(profile: CpuProfile): number {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  // A sample is floodgate's when, going up from the running function, the first frame that is not Node's own
  // (node: internals, natives) is floodgate's. So what floodgate calls in Node counts, but the framework or the
  // handler that floodgate's `next()` runs does not.
  const kind = (url: string): 'ours' | 'theirs' | 'node' =>
    url.includes('/node_modules/') || url.includes('/bench/')
      ? 'theirs'
      : url.includes('/dist/') || url.includes('/src/')
        ? 'ours'
        : 'node';
  const inside = new Map<number, boolean>();
  const isInside = (id: number): boolean => {
    let known = inside.get(id);
    if (known === undefined) {
      const k = kind(byId.get(id)!.callFrame.url);
      const up = parent.get(id);
      known = k === 'ours' || (k === 'node' && up !== undefined && isInside(up));
      inside.set(id, known);
    }
    return known;
  };
  let busy = 0;
  let floodgate = 0;
  const detail = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const name = byId.get(id)!.callFrame.functionName;
    if (name === '(idle)' || name === '(program)' || name === '(garbage collector)') return;
    const dt = profile.timeDeltas[i] ?? 0;
    busy += dt;
    if (isInside(id)) {
      floodgate += dt;
      if (process.env.PROFILE_DETAIL) {
        const f = byId.get(id)!.callFrame;
        const key = `${f.functionName} ${f.url.split('/').slice(-2).join('/')}`;
        detail.set(key, (detail.get(key) ?? 0) + dt);
      }
    }
  });
  if (process.env.PROFILE_DETAIL) {
    for (const [key, dt] of [...detail].sort((a, b) => b[1] - a[1]).slice(0, 12)) {
      console.log(`    ${((100 * dt) / busy).toFixed(2)} %  ${key}`);
    }
  }
  return floodgate / busy;
}

// ---- the deadline bookkeeping alone: what replacing a timer per request saves ----
async function micro(): Promise<void> {
  const { requestTimeouts } = await built<typeof import('../src/http/index.ts')>('http/index');
  const engine = requestTimeouts({ default: TIMEOUT_MS });
  const adapter = {
    expire: () => 'answered' as const,
    describe: () => ({ route: undefined, method: undefined }),
  };
  const n = 200_000;
  // Both designs need the per-request context; they differ in how the deadline is kept.
  const untimed = requestTimeouts();
  const contenders: Array<[string, () => void]> = [
    [
      'context alone (no deadline)',
      () => {
        for (let i = 0; i < n; i++) untimed.start(adapter, undefined).responseClosed(true);
      },
    ],
    [
      'context + shared deadline list',
      () => {
        for (let i = 0; i < n; i++) engine.start(adapter, undefined).responseClosed(true);
      },
    ],
    [
      'context + setTimeout per request',
      () => {
        for (let i = 0; i < n; i++) {
          const context = untimed.start(adapter, undefined);
          const timer = setTimeout(noop, TIMEOUT_MS);
          context.responseClosed(true);
          clearTimeout(timer);
        }
      },
    ],
    [
      'context + shared list, 1000 in flight',
      () => {
        const ring: Array<{ responseClosed(complete: boolean): void }> = [];
        for (let i = 0; i < n; i++) {
          ring.push(engine.start(adapter, undefined));
          if (ring.length > 1000) ring.shift()!.responseClosed(true);
        }
        for (const c of ring) c.responseClosed(true);
      },
    ],
    [
      'context + setTimeout, 1000 in flight',
      () => {
        const ring: Array<[{ responseClosed(complete: boolean): void }, NodeJS.Timeout]> = [];
        for (let i = 0; i < n; i++) {
          ring.push([untimed.start(adapter, undefined), setTimeout(noop, TIMEOUT_MS)]);
          if (ring.length > 1000) {
            const [context, timer] = ring.shift()!;
            context.responseClosed(true);
            clearTimeout(timer);
          }
        }
        for (const [context, timer] of ring) {
          context.responseClosed(true);
          clearTimeout(timer);
        }
      },
    ],
  ];
  const samples = new Map(contenders.map(([name]) => [name, [] as number[]]));
  for (const [, run] of contenders) run(); // warm-up
  for (let round = 0; round < 7; round++) {
    for (const [name, run] of contenders) {
      const start = process.hrtime.bigint();
      run();
      samples.get(name)!.push(Number(process.hrtime.bigint() - start) / n);
    }
  }
  // Ratios within a round (the contenders alternate): they hold on a shared machine where the ns do not.
  const alone = samples.get(contenders[0][0])!;
  console.log(
    "deadline bookkeeping per request (ns, median of 7 rounds; '×' the median of each round's ratio to",
  );
  console.log(`the first row's, measured in the same round):`);
  for (const [name] of contenders) {
    const ratio = median(samples.get(name)!.map((x, i) => x / alone[i]));
    console.log(
      `  ${name.padEnd(44)} ${median(samples.get(name)!).toFixed(0).padStart(6)} ns   ×${ratio.toFixed(2)}`,
    );
  }
}

function noop(): void {}

// ---- what a timed-out request costs over one its handler answers ----

/**
 * CPU per request, in process, of BURST simultaneous requests that time out (their handlers write late, after
 * the 504, and those writes are dropped) against BURST whose handlers answer in time — the same handler work
 * (one timer, one write, at the same moment) and the same floodgate middleware, so the difference is what a
 * timeout costs: answering, dropping the late writes, the abort. Idle time waiting for timers is not CPU.
 */
async function timedOutCost(): Promise<void> {
  const burst = Number(process.env.BURST ?? 2000);
  const rounds = Number(process.env.TIMED_OUT_ROUNDS ?? 5);
  const frameworks = (process.env.FRAMEWORKS ?? 'node,express,fastify,hono').split(',');
  const express = (await import('express')).default;
  const { Hono } = await import('hono');
  const { createAdaptorServer } = await import('@hono/node-server');
  const Fastify = (await import('fastify')).default;
  const floodgate = await builtAdapters();
  // Every handler writes at LATE_MS: the timed-out ones after their 20 ms deadline, the others well before their
  // 10 s one. Requests live equally long either way, so the garbage collector does not tell them apart.
  const DEADLINE_MS = 20;
  const LATE_MS = 200;

  const servers: Record<string, (timeout: number, delay: number) => Promise<http.Server>> = {
    node: async (timeout, delay) =>
      http.createServer(
        floodgate.node.requestTimeouts({ default: timeout })((_req, res) => {
          setTimeout(() => res.end('late or not'), delay);
        }),
      ),
    express: async (timeout, delay) => {
      const app = express();
      app.use(floodgate.express.requestTimeouts({ default: timeout }) as never);
      app.get('/', (_req, res) => {
        setTimeout(() => res.send('late or not'), delay);
      });
      return http.createServer(app);
    },
    fastify: async (timeout, delay) => {
      const app = Fastify();
      await app.register(floodgate.fastify.requestTimeouts, { default: timeout });
      app.get('/', async () => {
        await new Promise((resolve) => setTimeout(resolve, delay));
        return 'late or not';
      });
      await app.ready();
      return app.server;
    },
    hono: async (timeout, delay) => {
      const app = new Hono();
      app.use(floodgate.hono.requestTimeouts({ default: timeout }));
      app.get('/', async (c) => {
        await new Promise((resolve) => setTimeout(resolve, delay));
        return c.text('late or not');
      });
      return createAdaptorServer({ fetch: app.fetch }) as http.Server;
    },
  };

  const run = async (listener: Listener, wait: number): Promise<{ us: number; statuses: string }> => {
    const seen = new Map<number, number>();
    let finished = 0;
    const start = process.cpuUsage();
    const done = (status: number): void => {
      seen.set(status, (seen.get(status) ?? 0) + 1);
      finished++;
    };
    // In batches of 100, as a server reads them: one synchronous burst of 2000 Express requests outlasts the
    // 20 ms deadline, and timers set inside it count from the loop's stale clock.
    for (let i = 0; i < burst; i += 100) {
      for (let j = i; j < Math.min(burst, i + 100); j++) inject(listener, done);
      await new Promise(setImmediate);
    }
    // Until every response finished and every late write came and went.
    while (finished < burst) await new Promise((resolve) => setTimeout(resolve, 5));
    await new Promise((resolve) => setTimeout(resolve, wait));
    const used = process.cpuUsage(start);
    return {
      us: (used.user + used.system) / burst,
      statuses: [...seen].map(([status, n]) => `${status}×${n}`).join(' '),
    };
  };

  console.log(
    `\ntimed-out requests: CPU µs per request in process, ${burst} at once, median of ${rounds} alternating rounds, ` +
      `Node ${process.version}`,
  );
  console.log(
    "framework answered-in-time   timed-out   difference   × in time (median of each round's pair)   statuses",
  );
  for (const framework of frameworks) {
    const inTime = (await servers[framework](TIMEOUT_MS, LATE_MS)).listeners('request')[0] as Listener;
    const late = (await servers[framework](DEADLINE_MS, LATE_MS)).listeners('request')[0] as Listener;
    await run(inTime, LATE_MS); // warm-up
    await run(late, LATE_MS);
    const a: number[] = [];
    const b: number[] = [];
    let statuses = '';
    for (let round = 0; round < rounds; round++) {
      const pair = round % 2 === 0 ? ([inTime, late] as const) : ([late, inTime] as const);
      for (const listener of pair) {
        const result = await run(listener, LATE_MS);
        if (listener === late) {
          b.push(result.us);
          statuses = result.statuses;
        } else a.push(result.us);
      }
    }
    const [ma, mb] = [median(a), median(b)];
    const paired = median(b.map((x, i) => x / a[i]));
    console.log(
      `${framework.padEnd(9)} ${ma.toFixed(2).padStart(16)} ${mb.toFixed(2).padStart(11)} ${(mb - ma).toFixed(2).padStart(12)}` +
        ` ${`×${paired.toFixed(3)}`.padStart(12)}   ${statuses}`,
    );
  }
}
