/**
 * Overhead of the request-timeouts middleware on requests that finish in time.
 *
 *   npm run bench:timeouts                       # all frameworks, 5 rounds of 5 s
 *   ROUNDS=3 DURATION=4 CONNECTIONS=50 FRAMEWORKS=express,hono npm run bench:timeouts
 *   PROFILE=0 (skip the profile) · PROFILE_DURATION=5 · PROFILE_DETAIL=1 (floodgate's top functions)
 *
 * Each server runs in its own child process on a free loopback port, so that autocannon (in this process)
 * and the server do not share a core. Contenders run in alternation, round after round, and the medians of
 * requests/s are compared to the bare framework. A micro-benchmark of the deadline bookkeeping itself (the
 * shared deadline list against a `setTimeout` per request) comes first. The `no-op` contenders show what any
 * middleware (Express, Hono) or `onRequest` hook (Fastify) costs in that framework, before it does anything.
 */
import { type ChildProcess, fork } from 'node:child_process';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { MiddlewareHandler } from 'hono';

// Neither package ships types; these are the parts used here.
const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (options: {
  url: string;
  connections: number;
  duration: number;
  pipelining: number;
}) => Promise<{ requests: { average: number; total: number }; non2xx: number; errors: number }>;
const connectTimeout = require('connect-timeout') as (time: string) => unknown;

const TIMEOUT_MS = 10_000;

type Variant = { framework: string; name: string; start: () => Promise<http.Server> };

function listen(server: http.Server): Promise<http.Server> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function variants(): Promise<Variant[]> {
  const express = (await import('express')).default;
  const { Hono } = await import('hono');
  const { timeout: honoTimeout } = await import('hono/timeout');
  const { createAdaptorServer } = await import('@hono/node-server');
  const Fastify = (await import('fastify')).default;
  const floodgateNode = await import('../src/adapters/node/index.ts');
  const floodgateExpress = await import('../src/adapters/express/index.ts');
  const floodgateHono = await import('../src/adapters/hono/index.ts');
  const floodgateFastify = await import('../src/adapters/fastify/index.ts');

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
    if (extra === 'floodgate') await app.register(floodgateFastify.requestTimeouts, { default: TIMEOUT_MS });
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
        listen(http.createServer(floodgateNode.requestTimeouts({ default: TIMEOUT_MS })(nodeHandler))),
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
      start: () => listen(expressApp(floodgateExpress.requestTimeouts({ default: TIMEOUT_MS }) as never)),
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
      start: () => listen(honoApp(floodgateHono.requestTimeouts({ default: TIMEOUT_MS }))),
    },
    { framework: 'hono', name: 'hono/timeout', start: () => listen(honoApp(honoTimeout(TIMEOUT_MS))) },
  ];
}

// ---- child: serve one variant and report its port ----
if (process.argv[2] === '--serve') {
  const [framework, name] = process.argv.slice(3);
  const variant = (await variants()).find((v) => v.framework === framework && v.name === name)!;
  const server = await variant.start();
  // CPU time spent by this server, asked for before and after each run: on a shared machine it is a steadier
  // measure of cost per request than requests/s.
  process.on('message', (message) => {
    // A normal exit, so that --cpu-prof writes its profile.
    if (message === 'exit') process.exit(0);
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

  await micro();

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
    const childOf = new Map(chosen.map((v, i) => [v, children[i]]));
    for (const v of chosen) await load(ports.get(v)!, 1, connections); // warm-up
    for (let round = 0; round < rounds; round++) {
      // Rotate the order within each framework so that no contender always runs first.
      for (const framework of frameworks) {
        const group = chosen.filter((v) => v.framework === framework);
        for (let i = 0; i < group.length; i++) {
          const v = group[(i + round) % group.length];
          const child = childOf.get(v)!;
          const before = await cpuOf(child);
          const result = await load(ports.get(v)!, duration, connections);
          samples.get(v)!.push(result.perSecond);
          cpu.get(v)!.push(((await cpuOf(child)) - before) / result.total);
        }
      }
      process.stderr.write(`round ${round + 1}/${rounds} done\n`);
    }
    console.log(
      `\nrequests/s, median of ${rounds} alternating rounds of ${duration} s, ${connections} connections, ` +
        `Node ${process.version}, ${(await import('node:os')).cpus().length} CPUs`,
    );
    console.log('framework contender            req/s   % of bare   server CPU µs/req   % of bare cost');
    for (const framework of frameworks) {
      const group = chosen.filter((v) => v.framework === framework);
      const bareVariant = group.find((v) => v.name === 'bare')!;
      const bare = median(samples.get(bareVariant)!);
      const bareCpu = median(cpu.get(bareVariant)!);
      for (const v of group) {
        const m = median(samples.get(v)!);
        const c = median(cpu.get(v)!);
        console.log(
          `${framework.padEnd(9)} ${v.name.padEnd(17)} ${m.toFixed(0).padStart(8)} ${((100 * m) / bare).toFixed(1).padStart(9)} %` +
            ` ${c.toFixed(1).padStart(13)} µs ${((100 * bareCpu) / c).toFixed(1).padStart(13)} %`,
        );
      }
    }
  } finally {
    for (const child of children) child.kill();
  }
  const profileSeconds = Number(process.env.PROFILE_DURATION ?? 5);
  if (process.env.PROFILE !== '0') await profile(frameworks, profileSeconds, connections);
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
  for (const framework of frameworks) {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-prof-'));
    const child = fork(fileURLToPath(import.meta.url), ['--serve', framework, 'floodgate'], {
      execArgv: ['--cpu-prof', '--cpu-prof-dir', dir, '--import', 'tsx'],
      stdio: 'inherit',
    });
    const port = await new Promise<number>((resolve) =>
      child.once('message', (m: { port: number }) => resolve(m.port)),
    );
    await load(port, 1, connections);
    await load(port, duration, connections);
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
      : url.includes('/src/')
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

async function load(
  port: number,
  duration: number,
  connections: number,
): Promise<{ perSecond: number; total: number }> {
  const result = await autocannon({ url: `http://127.0.0.1:${port}/`, connections, duration, pipelining: 1 });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`port ${port}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { perSecond: result.requests.average, total: result.requests.total };
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

// ---- the deadline bookkeeping alone: what replacing a timer per request saves ----
async function micro(): Promise<void> {
  const { requestTimeouts } = await import('../src/http/index.ts');
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
  console.log('deadline bookkeeping per request (ns, median of 7 rounds):');
  for (const [name] of contenders)
    console.log(`  ${name.padEnd(44)} ${median(samples.get(name)!).toFixed(0)} ns`);
}

function noop(): void {}
