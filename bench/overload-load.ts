/**
 * The open-loop load generator of `bench:overload:sockets`, in its own process: Poisson arrivals at each phase's
 * rate, whatever the server answers (an arrival is never held back by an unanswered one); every request carries
 * its class (`x-class`) and its deadline (`x-deadline-ms`) and is abandoned (socket destroyed) at the deadline.
 * `closed` mode instead keeps `concurrency` requests in flight back to back, to measure capacity.
 * Sends back one record per request: when it was due, its class, status (0: abandoned or failed), latency.
 */
import http from 'node:http';

export interface OpenJob {
  mode: 'open';
  port: number;
  /** Arrivals per second of each class, per phase. */
  phases: { critical: number; sheddable: number; ms: number }[];
  deadlineMs: number;
}
export interface ClosedJob {
  mode: 'closed';
  port: number;
  concurrency: number;
  ms: number;
  deadlineMs: number;
}
/** Columns: due (ms from start), critical (0/1), status, latency ms. */
export interface LoadResult {
  due: number[];
  critical: number[];
  status: number[];
  latency: number[];
  /** How far behind schedule the generator fell at worst, ms (it cannot send faster than its own loop). */
  maxLagMs: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

function send(
  port: number,
  critical: boolean,
  deadlineMs: number,
  due: number,
  start: number,
  out: LoadResult,
  done?: () => void,
): void {
  const i = out.due.push(due - start) - 1;
  out.critical.push(critical ? 1 : 0);
  out.status.push(0);
  out.latency.push(Number.NaN);
  const finish = (status: number) => {
    if (out.status[i] !== 0 || !Number.isNaN(out.latency[i])) return;
    out.status[i] = status;
    out.latency[i] = performance.now() - due;
    clearTimeout(timer);
    done?.();
  };
  const req = http.get(
    {
      port,
      host: '127.0.0.1',
      path: '/',
      agent,
      headers: { 'x-class': critical ? 'critical' : 'sheddable', 'x-deadline-ms': String(deadlineMs) },
    },
    (res) => {
      res.resume();
      res.on('end', () => finish(res.statusCode ?? 0));
      res.on('error', () => finish(0));
    },
  );
  req.on('error', () => finish(0));
  // The deadline runs from when the request was due, not from when this loop got to it.
  const timer = setTimeout(
    () => {
      finish(0);
      req.destroy();
    },
    deadlineMs - (performance.now() - due),
  );
}

async function open(job: OpenJob): Promise<LoadResult> {
  const out: LoadResult = { due: [], critical: [], status: [], latency: [], maxLagMs: 0 };
  const start = performance.now();
  const end = start + job.phases.reduce((s, p) => s + p.ms, 0);
  const phaseAt = (t: number) => {
    let from = 0;
    for (const p of job.phases) {
      if (t < from + p.ms) return p;
      from += p.ms;
    }
    return job.phases[job.phases.length - 1];
  };
  let next = start;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next <= now && next < end) {
        out.maxLagMs = Math.max(out.maxLagMs, now - next);
        const phase = phaseAt(next - start);
        const rate = phase.critical + phase.sheddable;
        send(job.port, Math.random() * rate < phase.critical, job.deadlineMs, next, start, out);
        next += (-Math.log(1 - Math.random()) * 1000) / rate;
      }
      if (next >= end) resolve();
      else setTimeout(tick, Math.max(0, next - performance.now()));
    };
    tick();
  });
  await new Promise((r) => setTimeout(r, job.deadlineMs + 50)); // every request answered or abandoned
  return out;
}

async function closed(job: ClosedJob): Promise<LoadResult> {
  const out: LoadResult = { due: [], critical: [], status: [], latency: [], maxLagMs: 0 };
  const start = performance.now();
  await new Promise<void>((resolve) => {
    let running = job.concurrency;
    const loop = () => {
      if (performance.now() - start >= job.ms) {
        if (--running === 0) resolve();
        return;
      }
      send(job.port, false, job.deadlineMs, performance.now(), start, out, loop);
    };
    for (let i = 0; i < job.concurrency; i++) loop();
  });
  return out;
}

process.on('message', async (job: OpenJob | ClosedJob) => {
  const result = job.mode === 'open' ? await open(job) : await closed(job);
  process.send!(result);
});
process.on('disconnect', () => process.exit(0));
