/**
 * Overload over real sockets: `npm run bench:overload:sockets`.
 *
 * This process runs a real node:http server and a real Fastify server; each request does `CPU_MS` of CPU work
 * (a busy loop: the event loop is blocked, as by JSON or templates) and then awaits a call to a dependency with
 * `SLOTS` slots of `SERVICE_MS` (FIFO beyond: bench/overload-dependency.ts, its own process), within the
 * request's deadline (`x-deadline-ms`; past it the handler answers 504). An open-loop load generator in another
 * process (bench/overload-load.ts) sends Poisson arrivals, each abandoned at its deadline: `critical` at 20 % of
 * the capacity throughout (20 % of the traffic at 1×), `sheddable` the rest. Each run: 0.5× capacity, then a
 * spike of sheddable traffic to k× capacity in all, then 0.5× again; one server per gate lives through every
 * run, after 2 s of calm traffic to warm it (unmeasured).
 *
 * Gates: no limiter; `concurrency()` tuned at 1× (permits = the dependency's slots, a queue as long);
 * `adaptiveConcurrency()` with a 20 % critical reserve; the same with the event-loop brake; on Fastify,
 * `@fastify/under-pressure` (event-loop delay and utilisation). Columns: goodput (answers within the deadline
 * per second during the spike ÷ capacity), critical availability (critical requests of the spike answered
 * within their deadline), critical p99 ÷ unloaded p99, time back to full goodput after the spike (the first
 * 250 ms bin from which every bin has ≥ 95 % of its requests answered in time), the server's event-loop
 * utilisation during the spike, and the rate the generator achieved.
 *
 * Env: RATES=1,2,5,10,20  FRAMEWORKS=node,fastify  GATES=none,concurrency,adaptive,brake,under-pressure
 * SPIKE_MS=1500  SLOTS=4  SERVICE_MS=50  CPU_MS=1  DEADLINE_MS=1000; TRACE=1 prints an adaptive limit and what
 * is in flight every 100 ms. Bounded: the whole run stops after MAX_S (default 600) seconds (≈ 3 minutes on a
 * quiet 2-core machine); Ctrl-C stops the children too.
 */
import { type ChildProcess, fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import underPressure from '@fastify/under-pressure';
import Fastify from 'fastify';
import { rateLimiting as fastifyLimits } from '../src/adapters/fastify/index.ts';
import { rateLimiting as nodeLimits } from '../src/adapters/node/index.ts';
import { adaptiveConcurrency, concurrency, fixedWindow, type Limiter } from '../src/index.ts';
import type { ClosedJob, LoadResult, OpenJob } from './overload-load.ts';
import { percentile } from './overload-sim.ts';

const env = (name: string, fallback: string) => process.env[name] ?? fallback;
const RATES = env('RATES', '1,2,5,10,20').split(',').map(Number);
const FRAMEWORKS = env('FRAMEWORKS', 'node,fastify').split(',');
const GATES = env('GATES', 'none,concurrency,adaptive,brake,under-pressure').split(',');
const SPIKE_MS = Number(env('SPIKE_MS', '1500'));
const CALM_MS = 800;
const AFTER_MS = 1000;
const WARM_MS = 2000;
const SLOTS = Number(env('SLOTS', '4'));
const SERVICE_MS = Number(env('SERVICE_MS', '50'));
const CPU_MS = Number(env('CPU_MS', '1'));
const DEADLINE_MS = Number(env('DEADLINE_MS', '1000'));
const CRITICAL = 0.2;

// ── children: the dependency and the load generator; Ctrl-C and the time bound stop them ──────────────────
const children: ChildProcess[] = [];
let stopping = false;
const stop = (code: number) => {
  stopping = true;
  for (const child of children) child.kill('SIGKILL');
  process.exit(code);
};
process.on('SIGINT', () => stop(130));
process.on('SIGTERM', () => stop(143));
setTimeout(
  () => {
    console.error(`bench:overload:sockets: stopped after MAX_S=${env('MAX_S', '600')} s`);
    stop(1);
  },
  Number(env('MAX_S', '600')) * 1000,
).unref();

function start(file: string, extraEnv: Record<string, string> = {}): ChildProcess {
  const proc = fork(new URL(file, import.meta.url), {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...extraEnv },
  });
  children.push(proc);
  proc.once('exit', (code, signal) => {
    if (!stopping) {
      console.error(`${file} exited (${code ?? signal})`);
      stop(1);
    }
  });
  return proc;
}
const reply = <T>(proc: ChildProcess) =>
  new Promise<T>((resolve) => proc.once('message', (m) => resolve(m as T)));

const dependencyProc = start('./overload-dependency.ts', {
  SLOTS: String(SLOTS),
  SERVICE_MS: String(SERVICE_MS),
});
const DEP_PORT = (await reply<{ port: number }>(dependencyProc)).port;
const loadProc = start('./overload-load.ts');
const drive = (job: OpenJob | ClosedJob) => {
  loadProc.send(job);
  return reply<LoadResult>(loadProc);
};
const resetDependency = () =>
  new Promise<void>((resolve) =>
    http
      .request({ host: '127.0.0.1', port: DEP_PORT, method: 'POST' }, (res) =>
        res.resume().on('end', resolve),
      )
      .end(),
  );

// ── the application: CPU work, then the dependency within the request's deadline ────────────────────────
const ARRIVED = Symbol('arrived');
type Stamped = http.IncomingMessage & { [ARRIVED]?: number };
const stampArrival = (req: Stamped) => {
  req[ARRIVED] = performance.now();
};
const depAgent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

function callDependency(ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(
      {
        host: '127.0.0.1',
        port: DEP_PORT,
        path: '/',
        agent: depAgent,
        signal: AbortSignal.timeout(Math.ceil(ms)),
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200));
        res.on('error', () => resolve(false));
      },
    );
    req.on('error', () => resolve(false));
  });
}

/** The handler's work; the status to answer (504: the deadline passed). */
async function work(req: Stamped): Promise<number> {
  const arrived = req[ARRIVED] ?? performance.now();
  const deadline = Number(req.headers['x-deadline-ms']) || DEADLINE_MS;
  const spinUntil = performance.now() + CPU_MS;
  while (performance.now() < spinUntil); // CPU work: the event loop is blocked meanwhile
  const left = deadline - (performance.now() - arrived);
  if (left < 1) return 504;
  return (await callDependency(left)) ? 200 : 504;
}

const priority = (req: http.IncomingMessage) =>
  req.headers['x-class'] === 'critical' ? ('critical' as const) : ('sheddable' as const);

/** The limiter of a gate, made fresh for each run; undefined: none (or not floodgate's). */
function limiterOf(gate: string): Limiter | undefined {
  if (gate === 'reject-all') return fixedWindow({ permitLimit: 1, window: '1h' });
  if (gate === 'concurrency') return concurrency({ permitLimit: SLOTS, queueLimit: SLOTS });
  const classes = { reserve: { critical: 0.2 } };
  if (gate === 'adaptive') return adaptiveConcurrency({ queueLimit: SLOTS, classes });
  if (gate === 'brake') {
    return adaptiveConcurrency({
      queueLimit: SLOTS,
      classes,
      eventLoop: { maxDelay: '50ms', maxUtilization: 0.9 },
    });
  }
  return undefined;
}

async function serve(framework: string, gate: string): Promise<http.Server> {
  const limiter = limiterOf(gate);
  current = limiter;
  if (framework === 'node') {
    const handler = async (req: http.IncomingMessage, res: http.ServerResponse) => {
      res.statusCode = await work(req);
      res.end();
    };
    const limited = limiter ? nodeLimits({ global: limiter, priority, shared: true }) : undefined;
    const wrapped = limited ? limited(handler) : handler;
    const server = http.createServer((req, res) => {
      stampArrival(req);
      wrapped(req, res);
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return server;
  }
  const app = Fastify();
  if (gate === 'under-pressure') {
    await app.register(underPressure, { maxEventLoopDelay: 50, maxEventLoopUtilization: 0.9, retryAfter: 1 });
  }
  if (limiter)
    await app.register(fastifyLimits, {
      global: limiter,
      shared: true,
      priority: (request) => priority(request.raw),
    });
  app.get('/', async (request, reply) => {
    reply.code(await work(request.raw));
    return '';
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  app.server.keepAliveTimeout = 60_000;
  app.server.prependListener('request', stampArrival);
  return app.server;
}

const close = (server: http.Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

// ── measuring ─────────────────────────────────────────────────────────────────────────────────────────────
const ok = (r: LoadResult, i: number) => r.status[i] === 200 && r.latency[i] <= DEADLINE_MS;

function indices(r: LoadResult, from: number, to: number, critical?: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.due.length; i++) {
    if (r.due[i] >= from && r.due[i] < to && (critical === undefined || (r.critical[i] === 1) === critical))
      out.push(i);
  }
  return out;
}

async function capacity(): Promise<{ perSecond: number }> {
  const server = await serve('node', 'none');
  const port = (server.address() as AddressInfo).port;
  await drive({ mode: 'closed', port, concurrency: SLOTS, ms: 500, deadlineMs: DEADLINE_MS }); // warm-up
  const r = await drive({ mode: 'closed', port, concurrency: SLOTS * 4, ms: 3000, deadlineMs: DEADLINE_MS });
  await close(server);
  await resetDependency();
  return { perSecond: indices(r, 0, 3000).filter((i) => ok(r, i)).length / 3 };
}

/** The event loop's ceiling: how many requests per second this server can turn away (429) at most. */
async function rejectionCeiling(framework: string): Promise<number> {
  const server = await serve(framework, 'reject-all');
  const port = (server.address() as AddressInfo).port;
  const r = await drive({ mode: 'closed', port, concurrency: 64, ms: 1500, deadlineMs: DEADLINE_MS });
  await close(server);
  return r.status.filter((status) => status === 429).length / 1.5;
}

async function unloadedP99(framework: string, perSecond: number): Promise<number> {
  const server = await serve(framework, 'none');
  const port = (server.address() as AddressInfo).port;
  const r = await drive({
    mode: 'open',
    port,
    phases: [{ critical: perSecond * 0.2 * CRITICAL, sheddable: perSecond * 0.2 * (1 - CRITICAL), ms: 3000 }],
    deadlineMs: DEADLINE_MS,
  });
  await close(server);
  return percentile(
    indices(r, 500, 3000)
      .filter((i) => ok(r, i))
      .map((i) => r.latency[i]),
    0.99,
  );
}

interface Row {
  goodput: number;
  critical: number;
  criticalCount: number;
  criticalP99: number;
  recoveryMs: number;
  elu: number;
  sent: number;
}

let current: Limiter | undefined;

/**
 * Before the first run a server takes `WARM_MS` of calm traffic, unmeasured: a server lives long before its
 * spike, and an adaptive limiter spends its first half second probing the no-load latency.
 */
async function warm(server: http.Server, cap: number): Promise<void> {
  const port = (server.address() as AddressInfo).port;
  const critical = cap * CRITICAL;
  await drive({
    mode: 'open',
    port,
    phases: [{ critical, sheddable: cap * 0.5 - critical, ms: WARM_MS }],
    deadlineMs: DEADLINE_MS,
  });
}

/** One run on a server that lives through all of them (as a real one lives through its spikes). */
async function spike(server: http.Server, cap: number, k: number): Promise<Row> {
  const trace: string[] = [];
  const tracer = process.env.TRACE
    ? setInterval(() => {
        const stats = (
          current as { statistics?: () => { limit?: number; inFlight?: number } }
        )?.statistics?.();
        trace.push(`${stats?.limit ?? '–'}/${stats?.inFlight ?? '–'}`);
      }, 100)
    : undefined;
  const port = (server.address() as AddressInfo).port;
  // Critical traffic stays at 20 % of capacity; the spike is sheddable (what a user does not wait for).
  const critical = cap * CRITICAL;
  const calm = { critical, sheddable: cap * 0.5 - critical };
  const pending = drive({
    mode: 'open',
    port,
    phases: [
      { ...calm, ms: CALM_MS },
      { critical, sheddable: cap * k - critical, ms: SPIKE_MS },
      { ...calm, ms: AFTER_MS },
    ],
    deadlineMs: DEADLINE_MS,
  });
  let elu0 = performance.eventLoopUtilization();
  let elu = Number.NaN;
  const t0 = setTimeout(() => {
    elu0 = performance.eventLoopUtilization();
  }, CALM_MS);
  const t1 = setTimeout(() => {
    elu = performance.eventLoopUtilization(elu0).utilization;
  }, CALM_MS + SPIKE_MS);
  const r = await pending;
  clearTimeout(t0);
  clearTimeout(t1);
  clearInterval(tracer);
  if (trace.length > 0) console.log(`  limit/in flight every 100 ms: ${trace.join(' ')}`);
  await resetDependency();
  const end = CALM_MS + SPIKE_MS;
  const during = indices(r, CALM_MS, end);
  const criticals = indices(r, CALM_MS, end, true);
  const BIN = 250;
  let recoveryMs = Number.POSITIVE_INFINITY;
  for (let from = end + AFTER_MS - BIN; from >= end; from -= BIN) {
    const bin = indices(r, from, from + BIN);
    if (bin.length > 0 && bin.filter((i) => ok(r, i)).length < 0.95 * bin.length) break;
    recoveryMs = from - end;
  }
  return {
    goodput: during.filter((i) => ok(r, i)).length / (SPIKE_MS / 1000) / cap,
    critical: criticals.filter((i) => ok(r, i)).length / criticals.length,
    criticalCount: criticals.length,
    criticalP99: percentile(
      criticals.filter((i) => ok(r, i)).map((i) => r.latency[i]),
      0.99,
    ),
    recoveryMs,
    elu,
    sent: during.length / (SPIKE_MS / 1000) / (cap * k),
  };
}

// ── the run ───────────────────────────────────────────────────────────────────────────────────────────────
const started = new Date();
const { perSecond: cap } = await capacity();
const load = loadavg()
  .map((x) => x.toFixed(1))
  .join(' ');
console.log(
  `bench:overload:sockets — dependency ${SLOTS} slots × ${SERVICE_MS} ms (FIFO beyond), ${CPU_MS} ms CPU per ` +
    `request, deadline ${DEADLINE_MS} ms; critical at ${CRITICAL * 100} % of capacity throughout; 0.5× for ` +
    `${CALM_MS} ms, the spike (sheddable) for ${SPIKE_MS} ms, 0.5× for ${AFTER_MS} ms; load average ${load}\n` +
    `measured capacity (node:http, no limiter, closed loop): ${cap.toFixed(0)} answers/s ` +
    `(the dependency alone: ${((SLOTS / SERVICE_MS) * 1000).toFixed(0)}/s)`,
);
const pad = (s: string, n: number) => s.padStart(n);
const pct = (x: number) => (Number.isNaN(x) ? '–' : `${(100 * x).toFixed(1)} %`);
const times = (x: number) => (Number.isNaN(x) ? '–' : `${x.toFixed(2)}×`);
const recovery = (ms: number) =>
  Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : `> ${AFTER_MS / 1000} s`;
for (const framework of FRAMEWORKS) {
  const unloaded = await unloadedP99(framework, cap);
  const ceiling = await rejectionCeiling(framework);
  console.log(
    `\n${framework === 'node' ? 'node:http' : 'Fastify'} — unloaded p99 ${unloaded.toFixed(1)} ms; ` +
      `the event loop turns away at most ${ceiling.toFixed(0)} requests/s (${(ceiling / cap).toFixed(1)}× capacity)`,
  );
  console.log(
    ['gate', 'load', 'goodput', 'critical ok', 'crit p99/unl', 'back to full', 'ELU', 'sent']
      .map((h, i) => (i === 0 ? h.padEnd(14) : pad(h, i === 3 ? 16 : 12)))
      .join(' '),
  );
  for (const gate of GATES) {
    if (gate === 'under-pressure' && framework !== 'fastify') continue;
    if (gate === 'brake' && framework !== 'node') continue;
    const server = await serve(framework, gate);
    await warm(server, cap);
    for (const k of RATES) {
      const row = await spike(server, cap, k);
      console.log(
        [
          gate.padEnd(14),
          pad(`${k}×`, 12),
          pad(pct(row.goodput), 12),
          pad(`${pct(row.critical)} of ${row.criticalCount}`, 16),
          pad(times(row.criticalP99 / unloaded), 12),
          pad(recovery(row.recoveryMs), 12),
          pad(row.elu.toFixed(2), 12),
          pad(pct(row.sent), 12),
        ].join(' '),
      );
    }
    await close(server);
  }
}
console.log(`\n${started.toISOString()} · node ${process.version} · ${process.platform}/${process.arch}`);
stop(0);
