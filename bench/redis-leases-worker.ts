/**
 * One process of `bench/redis-leases.bench.ts`: takes jobs over IPC and decides on one key of a real
 * redis-server for `durationMs`, closed loop (`inflight` loops, each awaiting its decision) or at `rate`
 * decisions a second, with leases off (`strict`), forced (`leases`) or automatic (`auto`). With `file`, every
 * grant is written to it as it is made (one `write` each, so a SIGKILL loses none): the mark of the batch it came
 * from — the start of the window (segment) Redis counted it in, on Redis's clock — and, for a grant made inside
 * the call from the batch, `Date.now()` just before the call. A token bucket's batch has no mark: each grant is
 * written as the machine clock (the one Redis `TIME` reads here), to the microsecond, read before the call and
 * once its lease is here, between which it was made; its loops can alternate a steady demand with bursts.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { Redis } from 'ioredis';
import { fixedWindow, type Lease, slidingWindow, tokenBucket } from '../src/index.ts';
import { redisStore } from '../src/redis/index.ts';

export interface LeaseBenchJob {
  port: number;
  /** `chain`: a chain of two fixed windows (`limit`, `windowMs`) in one slot, decided only as a chain. */
  kind: 'fixed' | 'sliding' | 'bucket' | 'chain';
  mode: 'strict' | 'leases' | 'auto';
  limit: number;
  windowMs: number;
  segments: number;
  name: string;
  durationMs: number;
  /** Loops awaiting one decision each (closed loop). */
  inflight: number;
  /** Decisions per second at most over all loops (0: as fast as it can). */
  rate: number;
  /** Where to write every grant's mark (leased modes), or undefined. */
  file?: string;
  /** A bucket's refill (`limit` is its tokenLimit): tokens per period, continuous. */
  refill?: { tokens: number; periodMs: number };
  /**
   * Bursts (a bucket's runs): from `startAt` (`Date.now()`, the same for every worker), cycles of `coolMs` at one
   * decision per loop every `coolEveryMs` (the bucket refills, batches stay alive), then `hotMs` closed loop.
   */
  cycle?: { startAt: number; coolMs: number; hotMs: number; coolEveryMs: number };
  /** Wait this long after the last decision before reporting (the sweeper's give-backs reach Redis). */
  settleMs: number;
}

export interface LeaseBenchReport {
  decisions: number;
  granted: number;
  rejected: number;
  /** Answered by `onUnavailable` (Redis failed or was late). */
  errors: number;
  elapsedMs: number;
}

/** The machine clock to the microsecond. */
const wall = () => performance.timeOrigin + performance.now();

/** What `Promise.race` answers when the decision's promise was not settled at the call. */
const LATER = Promise.resolve('later' as const);

const client = new Redis({ port: Number(process.env.REDIS_PORT) });

async function run(job: LeaseBenchJob): Promise<LeaseBenchReport> {
  const store = redisStore({ client, timeoutMs: 2000 });
  const spec =
    job.kind === 'bucket'
      ? tokenBucket({
          tokenLimit: job.limit,
          tokensPerPeriod: job.refill!.tokens,
          period: job.refill!.periodMs,
          replenishment: 'continuous',
        })
      : job.kind === 'fixed' || job.kind === 'chain'
        ? fixedWindow({ permitLimit: job.limit, window: job.windowMs })
        : slidingWindow({ permitLimit: job.limit, window: job.windowMs, segmentsPerWindow: job.segments });
  const leases = job.mode === 'strict' ? false : job.mode === 'leases' ? true : 'auto';
  const limiter =
    job.kind === 'chain'
      ? store.chain(
          ...['a', 'b'].map((m) =>
            store.limiter(spec, { name: `${job.name}-${m}`, hashTag: job.name, leases }),
          ),
        )
      : store.limiter(spec, { name: job.name, hashTag: job.name, leases });
  const key = `floodgate:{${job.name}}${job.name}`;
  // The batch a grant came from: the store's internals, read only.
  const entries = (
    store as unknown as {
      context: { engine: { leases: { entries: Map<string, { batch: { mark: string } }> } } };
    }
  ).context.engine.leases.entries;
  const fd = job.file === undefined ? -1 : openSync(job.file, 'a');
  const report: LeaseBenchReport = { decisions: 0, granted: 0, rejected: 0, errors: 0, elapsedMs: 0 };
  const cycle = job.cycle;
  if (cycle) await new Promise((r) => setTimeout(r, Math.max(0, cycle.startAt - Date.now())));
  const started = performance.now();
  const deadline = (cycle?.startAt ?? Date.now()) + job.durationMs;
  const gap = job.rate > 0 ? (1000 * job.inflight) / job.rate : 0;
  const cool = () =>
    cycle !== undefined && (Date.now() - cycle.startAt) % (cycle.coolMs + cycle.hotMs) < cycle.coolMs;
  const loop = async () => {
    let n = 0;
    while (Date.now() < deadline) {
      // Local decisions settle in microtasks: yield to I/O now and then, as a server between requests does.
      if (cool()) await new Promise((r) => setTimeout(r, cycle!.coolEveryMs));
      else if (gap > 0) await new Promise((r) => setTimeout(r, gap));
      else if (++n % 32 === 0) await new Promise((r) => setImmediate(r));
      let lease: Lease;
      if (fd < 0) lease = await limiter.tryAcquire();
      else if (job.kind === 'bucket') {
        const lo = wall();
        lease = await limiter.tryAcquire();
        if (lease.granted) writeSync(fd, `${lo},${wall()}\n`);
      } else {
        const at = Date.now();
        const pending = limiter.tryAcquire();
        let mark = entries.get(key)?.batch.mark;
        // Made when a take came back: from the batch that answer filled, read by the first reaction.
        pending.then(() => {
          mark = entries.get(key)?.batch.mark;
        });
        const first = await Promise.race([pending, LATER]);
        const sync = first !== 'later';
        lease = sync ? first : await pending;
        if (lease.granted) writeSync(fd, sync ? `${mark},${at}\n` : `${mark}\n`);
      }
      report.decisions++;
      if (lease.granted) {
        report.granted++;
      } else {
        if (lease.reason === 'unavailable') report.errors++;
        report.rejected++;
      }
    }
  };
  await Promise.all(Array.from({ length: job.inflight }, loop));
  report.elapsedMs = performance.now() - started;
  if (fd >= 0) closeSync(fd);
  await new Promise((r) => setTimeout(r, job.settleMs));
  return report;
}

process.on('message', (job: LeaseBenchJob) => {
  run(job).then(
    (report) => process.send!(report),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
});
client.once('ready', () => process.send!('ready'));
