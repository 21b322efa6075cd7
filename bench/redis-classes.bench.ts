/**
 * Priority classes across a fleet (`npm run bench:redis:classes`): N separate Node processes share one
 * concurrency budget to one dependency through a real redis-server. Each process offers an open loop of requests
 * (Poisson arrivals, 20 % `critical`, the rest `sheddable`); a granted request holds its permit for the
 * dependency's service time, then releases it. Run at several multiples of the dependency's capacity
 * (limit ÷ service time), with the classes (`classes: { reserve: { critical } }`) and without (a plain
 * `concurrency()`), alternating. Prints per run: critical and sheddable availability (admitted ÷ offered), the
 * dependency's utilisation (permit-time held ÷ limit × the run's length), and the critical refusals Redis made while
 * the fleet held less than the whole limit (the claim: none — a critical request is refused only when every
 * permit is held, so never while the critical share is unused).
 *
 * Env: PROCESSES (4), LIMIT (20), SERVICE_MS (50), RUN_SECONDS (3 per run), LOADS ("1,2,4,8"), RESERVE (0.25).
 * Bounded: about LOADS × 2 × SECONDS plus start-up; Ctrl-C stops the workers and redis-server.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { concurrency, type Lease, type Priority } from '../src/index.ts';
import { redisStore } from '../src/redis/index.ts';
import { RedisServer } from '../test/support/redis-server.ts';

interface Run {
  port: number;
  name: string;
  classes: boolean;
  /** Arrivals per second offered by this process. */
  rate: number;
  seconds: number;
  limit: number;
  serviceMs: number;
  reserve: number;
}

interface Counts {
  offered: [critical: number, sheddable: number];
  admitted: [critical: number, sheddable: number];
  /** Critical refusals whose answer said permits were left (in the whole limit): must be 0. */
  criticalWithRoom: number;
  /** Permit-milliseconds held. */
  heldMs: number;
  /** Redis failed or was late (the fallback answered). */
  unavailable: number;
  /** From the first arrival to the last release. */
  elapsedMs: number;
}

function spec(run: Run) {
  return concurrency({
    permitLimit: run.limit,
    ...(run.classes ? { classes: { reserve: { critical: run.reserve } } } : {}),
  });
}

/** One process of the fleet: offers its arrivals for `seconds`, then reports its counts on IPC. */
async function worker(run: Run): Promise<Counts> {
  const client = new Redis({ port: run.port });
  const store = redisStore({ client, timeoutMs: 1000, onUnavailable: 'fail-closed', onError: () => {} });
  const limiter = store.limiter(spec(run), { name: run.name });
  const counts: Counts = {
    offered: [0, 0],
    admitted: [0, 0],
    criticalWithRoom: 0,
    heldMs: 0,
    unavailable: 0,
    elapsedMs: 0,
  };
  const pending = new Set<Promise<void>>();
  const offer = (critical: boolean) => {
    const i = critical ? 0 : 1;
    counts.offered[i]++;
    const priority: Priority = critical ? 'critical' : 'sheddable';
    const done = limiter.tryAcquire(1, priority).then(async (lease: Lease) => {
      if (!lease.granted) {
        // A plain limiter's refusal says what is left of the limit; a classed one's, of the critical class's
        // ceiling, which is the whole limit.
        if (critical && (lease.remaining ?? 0) > 0) counts.criticalWithRoom++;
        return;
      }
      counts.admitted[i]++;
      const start = performance.now();
      await new Promise((r) => setTimeout(r, run.serviceMs));
      counts.heldMs += performance.now() - start;
      lease.release();
    });
    pending.add(done);
    done.finally(() => pending.delete(done));
  };
  // Poisson arrivals: exponential gaps, sent in the timer tick they fall in.
  const started = performance.now();
  const end = started + run.seconds * 1000;
  let next = performance.now();
  while (performance.now() < end) {
    const now = performance.now();
    while (next <= now) {
      offer(Math.random() < 0.2);
      next += -Math.log(1 - Math.random()) * (1000 / run.rate);
    }
    await new Promise((r) => setTimeout(r, Math.max(0, Math.min(5, next - performance.now()))));
  }
  await Promise.all(pending);
  counts.elapsedMs = performance.now() - started;
  counts.unavailable = store.unavailable;
  client.disconnect();
  return counts;
}

if (process.env.FLOODGATE_CLASSES_WORKER) {
  process.once('message', (run: Run) => {
    worker(run).then(
      (counts) => process.send?.(counts, () => process.exit(0)),
      (error) => {
        console.error(error);
        process.exit(1);
      },
    );
  });
} else {
  await main();
}

async function main(): Promise<void> {
  const processes = Number(process.env.PROCESSES ?? 4);
  const limit = Number(process.env.LIMIT ?? 20);
  const serviceMs = Number(process.env.SERVICE_MS ?? 50);
  const seconds = Number(process.env.RUN_SECONDS ?? 3);
  const loads = (process.env.LOADS ?? '1,2,4,8').split(',').map(Number);
  const reserve = Number(process.env.RESERVE ?? 0.25);
  const capacity = (limit * 1000) / serviceMs;
  const server = await RedisServer.start();
  const children = new Set<ChildProcess>();
  const stop = () => {
    for (const c of children) c.kill('SIGKILL');
    void server.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  console.log(
    `${processes} processes, one concurrency budget of ${limit} on Redis, service ${serviceMs} ms (capacity ${capacity}/s), 20 % critical, reserve ${reserve * 100} % for critical; ${seconds} s per run; load average ${loadavg()[0].toFixed(1)}`,
  );
  console.log(
    'load | mode       | critical avail | sheddable avail | utilisation | critical refused with room | unavailable',
  );
  let runs = 0;
  try {
    for (const load of loads) {
      for (const classes of [true, false]) {
        const run: Run = {
          port: server.port,
          name: `classes-${runs++}`,
          classes,
          rate: (capacity * load) / processes,
          seconds,
          limit,
          serviceMs,
          reserve,
        };
        const results = await Promise.all(
          Array.from({ length: processes }, () => {
            const child = fork(process.argv[1], [], {
              execArgv: ['--import', 'tsx'],
              env: { ...process.env, FLOODGATE_CLASSES_WORKER: '1' },
            });
            children.add(child);
            return new Promise<Counts>((resolve, reject) => {
              child.once('message', (counts: Counts) => resolve(counts));
              child.once('exit', (code) => {
                children.delete(child);
                if (code !== 0) reject(new Error(`a worker exited with ${code}`));
              });
              child.send(run);
            });
          }),
        );
        const sum = (f: (c: Counts) => number) => results.reduce((a, c) => a + f(c), 0);
        const avail = (i: 0 | 1) =>
          sum((c) => c.admitted[i]) /
          Math.max(
            1,
            sum((c) => c.offered[i]),
          );
        const elapsed = Math.max(...results.map((c) => c.elapsedMs));
        const utilisation = sum((c) => c.heldMs) / (limit * elapsed);
        const pct = (x: number) => `${(x * 100).toFixed(1)} %`.padStart(14);
        console.log(
          `${`${load}×`.padStart(4)} | ${(classes ? 'classes' : 'no classes').padEnd(10)} | ${pct(avail(0))} | ${pct(avail(1)).padStart(15)} | ${pct(utilisation).padStart(11)} | ${String(sum((c) => c.criticalWithRoom)).padStart(26)} | ${sum((c) => c.unavailable)}`,
        );
      }
    }
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await server.stop();
  }
}
