/**
 * Overload protection, side by side in one run: no limiter, fixed `concurrency()` at the right value and at 3×
 * it, floodgate's `adaptiveConcurrency` (each algorithm) and p-limit (the most used Node concurrency gate).
 *   npm run bench:overload            (writes docs/overload.svg; OVERLOAD_SVG=0 skips it)
 *
 * A discrete-event simulation on a virtual clock (bench/overload-sim.ts): a dependency of fixed capacity
 * C = workers / service time, whose latency grows with what is in flight beyond its workers; clients that give
 * up after 1 s. Seeded: the figures repeat exactly, run after run, on any machine.
 */
import { writeFileSync } from 'node:fs';
import pLimit from 'p-limit';
import { adaptiveConcurrency, concurrency, type Priority } from '../src/index.ts';
import { svgChart, terminalChart } from './overload-chart.ts';
import {
  Dependency,
  type Gate,
  type Outcome,
  percentile,
  type RunOptions,
  Simulation,
  simulate,
  type TracePoint,
} from './overload-sim.ts';

const WORKERS = 20;
const SERVICE_MS = 20;
const CAPACITY = (WORKERS / SERVICE_MS) * 1000; // requests per second the dependency can answer
const CLIENT_TIMEOUT_MS = 1000;
const QUEUE = 10;
const SEED = 17;

type GateFactory = (sim: Simulation, reserve: boolean) => Gate;

function floodgate(
  name: string,
  build: (clock: Simulation['clock'], reserve: boolean) => ReturnType<typeof adaptiveConcurrency>,
): GateFactory {
  return (sim, reserve) => {
    const limiter = build(sim.clock, reserve);
    return {
      name,
      enter(priority, signal, admit, reject) {
        limiter.acquire(1, { signal, priority }).then(
          (lease) => {
            if (!lease.granted) return reject();
            admit((dropped) => lease.release(dropped ? { dropped: true } : undefined));
          },
          () => reject(),
        );
      },
      limit: () => limiter.statistics().limit,
    };
  };
}

const contenders: GateFactory[] = [
  () => ({
    name: 'no limiter',
    enter: (_p, _s, admit) => admit(() => {}),
  }),
  ...[WORKERS, 3 * WORKERS].map(
    (permits): GateFactory =>
      (sim) => {
        const limiter = concurrency({ permitLimit: permits, queueLimit: QUEUE, clock: sim.clock });
        return {
          name: `concurrency(${permits})${permits === WORKERS ? ' right' : ' 3×'}`,
          enter(_p, signal, admit, reject) {
            limiter.acquire(1, { signal }).then(
              (lease) => (lease.granted ? admit(() => lease.release()) : reject()),
              () => reject(),
            );
          },
          limit: () => permits,
        };
      },
  ),
  ...(['gradient', 'vegas', 'aimd', 'aimd-timeout'] as const).map((name) =>
    floodgate(
      name === 'aimd-timeout' ? `adaptive aimd (timeout ${2.5 * SERVICE_MS} ms)` : `adaptive ${name}`,
      (clock, reserve) =>
        adaptiveConcurrency({
          algorithm: name === 'aimd-timeout' ? 'aimd' : name,
          clock,
          queueLimit: QUEUE,
          // aimd learns its threshold (1.25 × the probed no-load latency) unless given a fixed one
          ...(name === 'aimd-timeout' ? { timeout: 2.5 * SERVICE_MS } : {}),
          ...(reserve ? { classes: { reserve: { critical: 0.2 } } } : {}),
        }),
    ),
  ),
  () => {
    const run = pLimit(WORKERS);
    return {
      name: `p-limit(${WORKERS})`,
      enter: (_p, _s, admit) => {
        run(() => new Promise<void>((done) => admit(() => done())));
      },
      limit: () => WORKERS,
    };
  },
];

const between = (outcomes: Outcome[], from: number, to: number) =>
  outcomes.filter((o) => o.arrived >= from && o.arrived < to);
const okRate = (outcomes: Outcome[], seconds: number) =>
  outcomes.filter((o) => o.result === 'ok').length / seconds;
const p99 = (outcomes: Outcome[]) =>
  percentile(
    outcomes.filter((o) => o.result === 'ok').map((o) => o.latencyMs),
    0.99,
  );
const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const ms = (x: number) => (Number.isNaN(x) ? '–' : `${x.toFixed(1)} ms`);
const times = (x: number) => (Number.isNaN(x) ? '–' : `${x.toFixed(2)}×`);

async function run(factory: GateFactory, options: Omit<RunOptions, 'dependency'>, reserve = false) {
  const sim = new Simulation();
  const gate = factory(sim, reserve);
  const result = await simulate(sim, gate, { ...options, dependency: new Dependency(WORKERS, SERVICE_MS) });
  return { gate, ...result };
}

/** Seconds after `from` until the limit stays within ±25 % (and ±2) of its median over the last 5 s. */
function convergence(trace: TracePoint[], from: number, end: number): number {
  const tail = trace.filter((p) => p.t >= end - 5000).map((p) => p.limit);
  const final = percentile(tail, 0.5);
  const band = Math.max(2, final * 0.25);
  let settled = from;
  for (const p of trace) if (p.t >= from && Math.abs(p.limit - final) > band) settled = p.t;
  return (settled - from) / 1000;
}

function table(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '─'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
}

async function main(): Promise<void> {
  const started = new Date();
  console.log(
    `bench:overload — simulated dependency: ${WORKERS} workers × ${SERVICE_MS} ms = capacity C ${CAPACITY}/s; ` +
      `clients give up after ${CLIENT_TIMEOUT_MS} ms; queues ${QUEUE}; seed ${SEED}; virtual clock`,
  );

  // Unloaded: 10 % of capacity, no limiter.
  const calm = await run(contenders[0], {
    seed: SEED,
    durationMs: 10_000,
    traffic: [{ priority: 'default', rate: () => CAPACITY * 0.1 }],
    serviceMs: () => SERVICE_MS,
    clientTimeoutMs: CLIENT_TIMEOUT_MS,
    sampleMs: 100,
  });
  const unloaded = p99(calm.outcomes);
  console.log(`unloaded p99 latency: ${ms(unloaded)} (3× after the step: ${ms(3 * unloaded)})\n`);

  // A: 1.5 C of traffic; at 10 s the dependency's latency triples (its capacity falls to C/3).
  const STEP = 10_000;
  const END = 25_000;
  console.log('A. 1.5×C offered; at 10 s the dependency gets 3× slower (C → C/3)');
  const rowsA: string[][] = [];
  const traces: { name: string; trace: TracePoint[] }[] = [];
  for (const factory of contenders.filter(
    (_, i) => process.env.OVERLOAD_QUICK !== '1' || (i >= 3 && i <= 4),
  )) {
    const r = await run(factory, {
      seed: SEED,
      durationMs: END,
      traffic: [{ priority: 'default', rate: () => CAPACITY * 1.5 }],
      serviceMs: (t) => (t < STEP ? SERVICE_MS : 3 * SERVICE_MS),
      clientTimeoutMs: CLIENT_TIMEOUT_MS,
      sampleMs: 100,
    });
    const before = between(r.outcomes, 2000, STEP);
    const after = between(r.outcomes, STEP + 5000, END);
    const adaptive = r.gate.name.startsWith('adaptive');
    if (adaptive) traces.push({ name: r.gate.name, trace: r.trace });
    rowsA.push([
      r.gate.name,
      pct(okRate(before, 8) / CAPACITY),
      times(p99(before) / unloaded),
      ms(
        percentile(
          before.filter((o) => o.result === 'ok').map((o) => o.waitMs),
          0.99,
        ),
      ),
      pct(okRate(after, 10) / (CAPACITY / 3)),
      times(p99(after) / (3 * unloaded)),
      pct(r.outcomes.filter((o) => o.result === 'rejected').length / r.outcomes.length),
      adaptive ? `${convergence(r.trace, STEP, END).toFixed(1)} s` : '–',
      adaptive
        ? `${percentile(
            r.trace.filter((p) => p.t >= END - 5000).map((p) => p.limit),
            0.5,
          )}`
        : '–',
    ]);
  }
  table(
    [
      'gate',
      'goodput/C',
      'p99/unl.',
      'p99 wait',
      'after: goodput/C',
      'after: p99/unl.',
      'shed',
      'limit settles',
      'limit',
    ],
    rowsA,
  );
  console.log(
    '(goodput over 2–10 s and 15–25 s; p99 of answered requests, wait included, over unloaded p99)\n',
  );

  if (process.env.OVERLOAD_QUICK === '1') return;
  // B: critical and sheddable at 0.3 C each; from 5 s to 10 s sheddable traffic ×12.
  console.log(
    'B. critical 0.1×C + sheddable 0.3×C; sheddable ×12 from 5 s to 10 s (adaptive: reserve critical 20 %)',
  );
  const rowsB: string[][] = [];
  for (const factory of contenders) {
    const r = await run(
      factory,
      {
        seed: SEED,
        durationMs: 15_000,
        traffic: [
          { priority: 'critical', rate: () => CAPACITY * 0.1 },
          { priority: 'sheddable', rate: (t) => CAPACITY * 0.3 * (t >= 5000 && t < 10_000 ? 12 : 1) },
        ],
        serviceMs: () => SERVICE_MS,
        clientTimeoutMs: CLIENT_TIMEOUT_MS,
        sampleMs: 100,
      },
      true,
    );
    const critical = r.outcomes.filter((o) => o.priority === ('critical' satisfies Priority));
    const spike = between(critical, 5000, 10_000);
    const waits = spike.filter((o) => !Number.isNaN(o.waitMs)).map((o) => o.waitMs);
    rowsB.push([
      r.gate.name,
      pct(critical.filter((o) => o.result === 'ok').length / critical.length),
      pct(spike.filter((o) => o.result === 'ok').length / spike.length),
      ms(percentile(waits, 0.99)),
      times(p99(spike) / unloaded),
      pct(okRate(between(r.outcomes, 5000, 10_000), 5) / CAPACITY),
    ]);
  }
  table(
    ['gate', 'critical ok', 'during spike', 'critical p99 wait', 'critical p99/unl.', 'goodput/C'],
    rowsB,
  );
  console.log();

  // C: every call times out (the dependency hangs); each lease is released { dropped: true } after 1 s.
  console.log(
    'C. the dependency hangs: every call times out after 1 s (released { dropped: true }), 0.5×C offered',
  );
  const rowsC: string[][] = [];
  for (const factory of contenders.filter((_, i) => i >= 3 && i <= 5)) {
    const r = await run(factory, {
      seed: SEED,
      durationMs: 20_000,
      traffic: [{ priority: 'default', rate: () => CAPACITY * 0.5 }],
      serviceMs: () => 1e9,
      clientTimeoutMs: CLIENT_TIMEOUT_MS,
      sampleMs: 100,
    });
    const limits = r.trace.map((p) => p.limit);
    const grew = limits.some((l, i) => i > 0 && l > limits[i - 1]);
    rowsC.push([
      r.gate.name,
      String(limits[0]),
      String(Math.max(...limits)),
      String(limits.at(-1)),
      grew ? 'yes' : 'no',
    ]);
  }
  rowsC.push(['Gradient2 rule (replica)', '20', String(gradient2OnTimeouts()), '', 'yes']);
  table(['gate', 'limit at 0.1 s', 'max', 'at 20 s', 'ever grew'], rowsC);
  console.log(
    "(replica: Netflix Gradient2's published update rule fed the same constant 1 s samples, drops ignored)\n",
  );

  for (const { name, trace } of traces) terminalChart(`A. ${name}: limit and p99 latency`, trace, STEP);
  if (process.env.OVERLOAD_SVG !== '0') {
    writeFileSync(new URL('../docs/overload.svg', import.meta.url), svgChart(traces, STEP, unloaded));
    console.log('wrote docs/overload.svg');
  }
  console.log(`${started.toISOString()} · node ${process.version} · ${process.platform}/${process.arch}`);
}

/**
 * Gradient2's update, as published (shortRtt/longRtt ratio clamped to [0.5, 1], + queue size 4, smoothing 0.2,
 * drops ignored), on 200 windows whose every sample is the 1 s client timeout: the limit it ends at.
 */
function gradient2OnTimeouts(): number {
  let limit = 20;
  const longRtt = 1000;
  for (let i = 0; i < 200; i++) {
    const shortRtt = 1000;
    const gradient = Math.max(0.5, Math.min(1, longRtt / shortRtt));
    const next = limit * gradient + 4;
    limit = Math.min(1000, limit * 0.8 + next * 0.2);
  }
  return Math.floor(limit);
}

await main();
