import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Dependency, type Outcome, percentile, Simulation, simulate } from '../../bench/overload-sim.ts';
import { type AdaptiveAlgorithm, adaptiveConcurrency } from '../../src/index.ts';

// bench:overload's scenario A on its virtual clock: a dependency of 20 workers × 20 ms (C = 1000/s, the right
// limit 20), 1.5 C offered, clients that give up after 1 s; at 10 s the dependency gets 3× slower (C/3, the
// right limit still 20). Seeded: every run is the same run.
const WORKERS = 20;
const SERVICE_MS = 20;
const CAPACITY = (WORKERS / SERVICE_MS) * 1000;
/** The right limit: what keeps every worker busy and nothing waiting (capacity × no-load latency, Little). */
const RIGHT = WORKERS;
const STEP = 10_000;
const END = 20_000;
const base = { seed: 17, clientTimeoutMs: 1000, sampleMs: 100 };

const answered = (outcomes: Outcome[], from: number, to: number) =>
  outcomes.filter((o) => o.arrived >= from && o.arrived < to && o.result === 'ok');
const p99 = (outcomes: Outcome[]) =>
  percentile(
    outcomes.map((o) => o.latencyMs),
    0.99,
  );

async function unloadedP99(): Promise<number> {
  const sim = new Simulation();
  const { outcomes } = await simulate(
    sim,
    { name: 'none', enter: (_p, _s, admit) => admit(() => {}) },
    {
      ...base,
      durationMs: 10_000,
      traffic: [{ priority: 'default', rate: () => CAPACITY * 0.1 }],
      dependency: new Dependency(WORKERS, SERVICE_MS),
      serviceMs: () => SERVICE_MS,
    },
  );
  return p99(answered(outcomes, 0, 10_000));
}

async function scenarioA(algorithm: AdaptiveAlgorithm) {
  const sim = new Simulation();
  const limiter = adaptiveConcurrency({ algorithm, clock: sim.clock, queueLimit: 10 });
  const { outcomes, trace } = await simulate(
    sim,
    {
      name: algorithm,
      enter(priority, signal, admit, reject) {
        limiter.acquire(1, { signal, priority }).then(
          (lease) => {
            if (!lease.granted) return reject();
            admit((dropped) => lease.release(dropped ? { dropped: true } : undefined));
          },
          () => reject(),
        );
      },
      limit: () => limiter.currentLimit,
    },
    {
      ...base,
      durationMs: END,
      traffic: [{ priority: 'default', rate: () => CAPACITY * 1.5 }],
      dependency: new Dependency(WORKERS, SERVICE_MS),
      serviceMs: (t) => (t < STEP ? SERVICE_MS : 3 * SERVICE_MS),
    },
  );
  const before = answered(outcomes, 2000, STEP);
  const after = answered(outcomes, STEP + 3000, END);
  // The limit once the first probe is over, and again from 1 s after the step (the level shift is re-probed).
  const within = (from: number, to: number) => {
    const points = trace.filter((p) => p.t >= from && p.t < to);
    const near = points.filter((p) => p.limit >= RIGHT * 0.5 && p.limit <= RIGHT * 1.5);
    return near.length / points.length;
  };
  const limits = (from: number, to: number) =>
    [0.05, 0.5, 0.95].map((q) =>
      percentile(
        trace.filter((p) => p.t >= from && p.t < to).map((p) => p.limit),
        q,
      ),
    );
  return {
    goodputBefore: before.length / 8 / CAPACITY,
    goodputAfter: after.length / ((END - STEP - 3000) / 1000) / (CAPACITY / 3),
    p99Before: p99(before),
    p99After: p99(after),
    withinBefore: within(1000, STEP),
    withinAfter: within(STEP + 1000, END),
    limitsBefore: limits(1000, STEP),
    limitsAfter: limits(STEP + 1000, END),
  };
}

test('every algorithm with its defaults keeps p99 ≤ 2× unloaded and goodput ≥ 98 % in the simulation, before and after a 3× slowdown', async () => {
  const unloaded = await unloadedP99();
  for (const algorithm of ['gradient', 'vegas', 'aimd'] as const) {
    const r = await scenarioA(algorithm);
    const seen = `${algorithm}: ${JSON.stringify(r)} (unloaded p99 ${unloaded})`;
    assert.ok(r.p99Before <= 2 * unloaded, seen);
    assert.ok(r.p99After <= 2 * 3 * unloaded, seen);
    assert.ok(r.goodputBefore >= 0.98 && r.goodputAfter >= 0.98, seen);
  }
});

// gradient is left out here: it holds 28 before the step and 30–34 after it (√limit of growth per window
// overshoots), within ±50 % 21 % of the time after the step; its latency goal holds (above).
test('aimd and vegas with their defaults hold the limit within ±50 % of the right one ≥ 90 % of the time, before and after a 3× slowdown (aimd learns its threshold: no timeout given)', async () => {
  for (const algorithm of ['vegas', 'aimd'] as const) {
    const r = await scenarioA(algorithm);
    const seen = `${algorithm}: ${JSON.stringify(r)}`;
    assert.ok(r.withinBefore >= 0.9 && r.withinAfter >= 0.9, seen);
  }
});

// A spike after a quiet spell: 5 workers × 20 ms (C = 250/s, the right limit 5, under the initial limit of 20);
// critical traffic at 0.2 C throughout, sheddable at 0.2 C, then 5 C in all from 5 s to 7 s.
async function spikeAfterQuiet(algorithm: AdaptiveAlgorithm) {
  const workers = 5;
  const capacity = (workers / SERVICE_MS) * 1000;
  const sim = new Simulation();
  const limiter = adaptiveConcurrency({
    algorithm,
    clock: sim.clock,
    queueLimit: workers,
    classes: { reserve: { critical: 0.2 } },
  });
  const { outcomes, trace } = await simulate(
    sim,
    {
      name: algorithm,
      enter(priority, signal, admit, reject) {
        limiter.acquire(1, { signal, priority }).then(
          (lease) => {
            if (!lease.granted) return reject();
            admit((dropped) => lease.release(dropped ? { dropped: true } : undefined));
          },
          () => reject(),
        );
      },
      limit: () => limiter.currentLimit,
    },
    {
      ...base,
      durationMs: 8000,
      traffic: [
        { priority: 'critical', rate: () => capacity * 0.2 },
        { priority: 'sheddable', rate: (t) => capacity * (t >= 5000 && t < 7000 ? 4.8 : 0.2) },
      ],
      dependency: new Dependency(workers, SERVICE_MS),
      serviceMs: () => SERVICE_MS,
    },
  );
  const spike = outcomes.filter((o) => o.arrived >= 5000 && o.arrived < 7000);
  const critical = spike.filter((o) => o.priority === 'critical');
  return {
    // the median limit over the last second before the spike
    limitBefore: percentile(
      trace.filter((p) => p.t >= 4000 && p.t < 5000).map((p) => p.limit),
      0.5,
    ),
    goodput: spike.filter((o) => o.result === 'ok').length / 2 / capacity,
    critical: critical.filter((o) => o.result === 'ok').length / critical.length,
    p99First500ms: p99(answered(spike, 5000, 5500)),
  };
}

// Before the limit decayed when unused it met the spike at 20 (16 for aimd), 4× the right limit: p99 over its
// first 500 ms 4.5× (gradient), 4.0× (vegas), 3.1× (aimd) unloaded; now 3.4×, 3.4×, 2.6×. Not 2×: waiters may
// wait up to queueInterval (100 ms) before the queue counts as standing, and at a limit this small the queue
// gradient and vegas allow (√limit, 3–6·log10(limit)) is as large as the limit itself: they settle near 12.
test('a spike after a quiet spell meets a limit near what was used (≤ 2× the right one), not the untested initial one: p99 over its first 500 ms ≤ 3.5× unloaded, critical ≥ 97.5 %, goodput ≥ 95 %', async () => {
  const unloaded = await unloadedP99();
  for (const algorithm of ['gradient', 'vegas', 'aimd'] as const) {
    const r = await spikeAfterQuiet(algorithm);
    const seen = `${algorithm}: ${JSON.stringify(r)} (unloaded p99 ${unloaded})`;
    assert.ok(r.limitBefore <= 2 * 5, seen);
    assert.ok(r.p99First500ms <= 3.5 * unloaded, seen);
    assert.ok(r.critical >= 0.975 && r.goodput >= 0.95, seen);
  }
});
