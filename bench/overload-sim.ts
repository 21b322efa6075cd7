/**
 * A discrete-event simulation on a virtual clock, for `npm run bench:overload`: a dependency of fixed capacity,
 * clients with timeouts, and a gate (a limiter or none) in front. Nothing waits on real time, so every run with
 * the same seed gives the same figures. Limiters get the virtual clock; their queue timers never fire (the
 * simulation runs within one macrotask), so queue-delay bounds apply on each arrival and release.
 */

/** A seeded PRNG (mulberry32): the same seed, the same run. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A binary min-heap keyed by `key`. */
class Heap<T> {
  private readonly items: T[] = [];
  constructor(private readonly key: (item: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.key(a[p]) <= this.key(a[i])) break;
      [a[p], a[i]] = [a[i], a[p]];
      i = p;
    }
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.key(a[l]) < this.key(a[m])) m = l;
        if (r < a.length && this.key(a[r]) < this.key(a[m])) m = r;
        if (m === i) break;
        [a[m], a[i]] = [a[i], a[m]];
        i = m;
      }
    }
    return top;
  }
}

interface Job {
  finish: number; // virtual work mark at which it completes
  done: () => void;
}

/**
 * A dependency with `workers` workers shared by processor sharing: with n jobs in flight each progresses at
 * min(1, workers / n), so latency is the service time up to `workers` in flight and grows with what is in
 * flight beyond. Capacity: workers / mean service time. Jobs whose caller gave up still run (wasted work).
 */
export class Dependency {
  serviceMs: number;
  private work = 0; // work done per job since start (virtual)
  private last = 0;
  private readonly jobs = new Heap<Job>((j) => j.finish);

  constructor(
    readonly workers: number,
    serviceMs: number,
  ) {
    this.serviceMs = serviceMs;
  }

  get inFlight(): number {
    return this.jobs.size;
  }

  private rate(): number {
    return this.jobs.size === 0 ? 0 : Math.min(1, this.workers / this.jobs.size);
  }

  private advance(now: number): void {
    this.work += (now - this.last) * this.rate();
    this.last = now;
  }

  /** Starts a job of `workMs` of service. */
  start(now: number, workMs: number, done: () => void): void {
    this.advance(now);
    this.jobs.push({ finish: this.work + workMs, done });
  }

  /** When the next job completes (Infinity when idle). */
  next(): number {
    const top = this.jobs.peek();
    if (top === undefined) return Number.POSITIVE_INFINITY;
    return this.last + (top.finish - this.work) / this.rate();
  }

  /** Completes the next job at `now`. */
  complete(now: number): void {
    this.advance(now);
    this.jobs.pop()!.done();
  }
}

interface Timed {
  at: number;
  seq: number;
  run: () => void;
}

/** The virtual clock and the event list. */
export class Simulation {
  now = 0;
  private seq = 0;
  private readonly events = new Heap<Timed>((e) => e.at + e.seq * 1e-12);
  readonly clock = { now: () => this.now };

  at(t: number, run: () => void): void {
    this.events.push({ at: t, seq: this.seq++, run });
  }

  /** Runs events and the dependency's completions in time order until `end`, letting promises settle. */
  async run(end: number, dependency: Dependency): Promise<void> {
    for (;;) {
      const event = this.events.peek();
      const completion = dependency.next();
      const t = Math.min(event?.at ?? Number.POSITIVE_INFINITY, completion);
      if (t > end) break;
      this.now = t;
      if (completion <= (event?.at ?? Number.POSITIVE_INFINITY)) dependency.complete(t);
      else this.events.pop()!.run();
      for (let i = 0; i < 6; i++) await null; // grants and rejections resolve at this virtual instant
    }
    this.now = end;
  }
}

/** A class of traffic, and when and how fast it arrives. */
export interface Traffic {
  priority: 'critical' | 'default' | 'sheddable';
  /** Arrivals per second at virtual time t (ms). */
  rate: (t: number) => number;
}

/** What a gate does with one request. */
export interface Gate {
  readonly name: string;
  /**
   * Admits (calls `admit` with a release that reports the outcome), rejects (`reject`), or lets the request wait;
   * `signal` aborts when the client gives up.
   */
  enter(
    priority: Traffic['priority'],
    signal: AbortSignal,
    admit: (release: (dropped: boolean) => void) => void,
    reject: () => void,
  ): void;
  /** The limit in force, when there is one. */
  limit?(): number;
}

/** One request's fate. */
export interface Outcome {
  priority: Traffic['priority'];
  arrived: number;
  /** 'ok' (answered within the client timeout), 'rejected' by the gate, 'timeout' (the client gave up). */
  result: 'ok' | 'rejected' | 'timeout';
  /** Wait in the gate, ms (NaN when never admitted). */
  waitMs: number;
  /** Arrival to answer, ms (for 'ok'). */
  latencyMs: number;
}

/** Options of one simulated run. */
export interface RunOptions {
  seed: number;
  durationMs: number;
  traffic: Traffic[];
  dependency: Dependency;
  /** Service time per job at time t: the mean, times U(0.5, 1.5). */
  serviceMs: (t: number) => number;
  clientTimeoutMs: number;
  /** Sample the gate's limit and the latency every this many ms. */
  sampleMs: number;
}

/** A trace point: the limit and the p99 latency of answers in the last sample period. */
export interface TracePoint {
  t: number;
  limit: number;
  p99: number;
}

/** Runs `gate` under `options`; returns every request's outcome and the trace. */
export async function simulate(
  sim: Simulation,
  gate: Gate,
  options: RunOptions,
): Promise<{ outcomes: Outcome[]; trace: TracePoint[] }> {
  const rng = random(options.seed);
  const outcomes: Outcome[] = [];
  const trace: TracePoint[] = [];
  let recent: number[] = [];
  const dependency = options.dependency;

  const request = (priority: Traffic['priority']): void => {
    const arrived = sim.now;
    const outcome: Outcome = {
      priority,
      arrived,
      result: 'timeout',
      waitMs: Number.NaN,
      latencyMs: Number.NaN,
    };
    outcomes.push(outcome);
    const controller = new AbortController();
    let settled = false;
    let releaseLease: ((dropped: boolean) => void) | undefined;
    sim.at(arrived + options.clientTimeoutMs, () => {
      if (settled) return;
      settled = true;
      outcome.result = 'timeout';
      controller.abort(new Error('client timeout'));
      releaseLease?.(true); // the caller gives up on the dependency: a drop
    });
    gate.enter(
      priority,
      controller.signal,
      (release) => {
        if (settled) {
          release(true);
          return;
        }
        outcome.waitMs = sim.now - arrived;
        releaseLease = release;
        const work = options.serviceMs(sim.now) * (0.5 + rng());
        dependency.start(sim.now, work, () => {
          if (settled) return; // the client already gave up; the work was wasted
          settled = true;
          outcome.result = 'ok';
          outcome.latencyMs = sim.now - arrived;
          recent.push(outcome.latencyMs);
          release(false);
        });
      },
      () => {
        if (settled) return;
        settled = true;
        outcome.result = 'rejected';
      },
    );
  };

  for (const traffic of options.traffic) {
    const next = (): void => {
      const rate = traffic.rate(sim.now);
      const gap = rate <= 0 ? 10 : -Math.log(1 - rng()) * (1000 / rate);
      if (sim.now + gap >= options.durationMs) return; // then every request gets its answer or its timeout
      sim.at(sim.now + gap, () => {
        if (traffic.rate(sim.now) > 0) request(traffic.priority);
        next();
      });
    };
    next();
  }
  const sample = (): void => {
    trace.push({ t: sim.now, limit: gate.limit?.() ?? Number.NaN, p99: percentile(recent, 0.99) });
    recent = [];
    if (sim.now + options.sampleMs <= options.durationMs) sim.at(sim.now + options.sampleMs, sample);
  };
  sim.at(options.sampleMs, sample);
  await sim.run(options.durationMs + options.clientTimeoutMs, dependency);
  return { outcomes, trace };
}

/** The `q` quantile of `values` (NaN when empty). */
export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
