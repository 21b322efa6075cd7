/**
 * Leased decisions across real processes (issue 26, Measure): a real redis-server on a free port and N separate
 * Node processes (`bench/redis-leases-worker.ts`) on one hot key.
 *
 *   npm run bench:redis:leases                  everything, well under three minutes
 *   ONLY=bound|cost|share|threshold|bucket|chain …    one section
 *   WINDOWS=20 WINDOW_MS=200 ROUNDS=2 PHASE_MS=1500 …
 *
 * Sections:
 * - bound: admitted per window ÷ limit, worst window, fixed and sliding, N = 4 and 8, closed loop, leases on
 *   (`leases: true`), one process SIGSTOPped for two windows and one SIGKILLed mid-window in every run. Each
 *   grant is counted in the window (segment) Redis counted it in: the mark of its batch, which is the window's
 *   start on Redis's clock (`TIME`), written to a file by the process as the grant is made. For a sliding window
 *   every run of `segments` consecutive segments is a window. Grants made inside the call are also checked by
 *   the machine clock (`Date.now()` before the call, the clock Redis `TIME` reads here): none may lie in a later
 *   window than its mark.
 * - cost: Redis commands per decision (`INFO commandstats` after `CONFIG RESETSTAT`: every command, those run
 *   inside Functions included) and decisions per second per process, N = 4 and 8, a limit no run reaches (every
 *   decision a grant), modes alternated in each round: strict (today's coalesced call per decision), leases,
 *   auto.
 * - share: one hot process (closed loop) and seven nearly idle ones (5 decisions a second each), leases on: the
 *   hot process's admissions per full window ÷ the limit, fixed and sliding.
 * - threshold: one process deciding one key at 20 … 1000 decisions a second, commands per decision strict,
 *   leased and automatic: where leases start to pay, which `leases: 'auto'`'s promotion rate is set by.
 * - bucket: a leased token bucket, N = 4 and 8: the worst overshoot over any span against the stated bound (1 %
 *   of tokenLimit), from grants timed on the machine clock (see `bucket`); then the cost section's table on a
 *   bucket.
 * - chain: the cost section's table on a chain of two fixed windows (one hash tag), decided only as a chain:
 *   what a leased chain's round trips cost Redis when its members are hot through the chain alone.
 *
 * Ctrl-C kills the workers and redis-server.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { worstOvershoot } from '../test/support/overshoot.ts';
import { RedisServer } from '../test/support/redis-server.ts';
import type { LeaseBenchJob, LeaseBenchReport } from './redis-leases-worker.ts';

const WORKER = fileURLToPath(new URL('./redis-leases-worker.ts', import.meta.url));
const ONLY = process.env.ONLY;
const WINDOWS = Number(process.env.WINDOWS ?? 22);
const WINDOW_MS = Number(process.env.WINDOW_MS ?? 200);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const PHASE_MS = Number(process.env.PHASE_MS ?? 1500);
const SEGMENTS = 4;
/** The share section's window: long enough that a stall of this loaded VM's scheduler is not most of it. */
const SHARE_WINDOW_MS = Number(process.env.SHARE_WINDOW_MS ?? 1000);
const SHARE_WINDOWS = Number(process.env.SHARE_WINDOWS ?? 10);

const dir = mkdtempSync(join(tmpdir(), 'floodgate-leases-bench-'));
const server = await RedisServer.start();
const admin = new Redis({ port: server.port });
const children = new Set<ChildProcess>();

function cleanup(): void {
  for (const child of children) child.kill('SIGKILL');
  server.process.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startWorker(): Promise<ChildProcess> {
  const child = fork(WORKER, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, REDIS_PORT: String(server.port) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`worker exited (${code}) before it was ready`)));
  });
  return child;
}

/** Workers kept between runs (a SIGKILLed one is replaced). */
const pool: ChildProcess[] = [];
async function workers(n: number): Promise<ChildProcess[]> {
  for (let i = 0; i < pool.length; i++)
    if (pool[i].exitCode !== null || pool[i].signalCode !== null) pool.splice(i--, 1);
  const missing = n - pool.length;
  if (missing > 0) pool.push(...(await Promise.all(Array.from({ length: missing }, startWorker))));
  return pool.slice(0, n);
}

/** Sends each worker its job; resolves with each report (undefined: the worker died first). */
function runJobs(
  ws: ChildProcess[],
  jobOf: (i: number) => LeaseBenchJob,
): Promise<(LeaseBenchReport | undefined)[]> {
  return Promise.all(
    ws.map(
      (child, i) =>
        new Promise<LeaseBenchReport | undefined>((resolve) => {
          const onExit = () => resolve(undefined);
          child.once('exit', onExit);
          child.once('message', (r) => {
            child.off('exit', onExit);
            resolve(r as LeaseBenchReport);
          });
          child.send(jobOf(i));
        }),
    ),
  );
}

let names = 0;
const nameOf = (what: string) => `lb-${what}-${process.pid}-${names++}`;

/** Every command Redis ran since the last reset (inside Functions included), the bench's own excepted. */
async function commands(): Promise<number> {
  const info = String(await admin.info('commandstats'));
  let total = 0;
  for (const m of info.matchAll(/cmdstat_([\w|]+):calls=(\d+)/g)) {
    if (!/^(info|config|client|hello|ping|select|function|cluster|command)/.test(m[1])) total += Number(m[2]);
  }
  return total;
}

const fmt = (x: number, d = 3) => x.toFixed(d);

/** Per window, the grants all processes wrote; worst admitted ÷ limit; grants seen by the clock in a later window. */
function tally(files: string[], kind: 'fixed' | 'sliding', limit: number, windowMs: number) {
  const segments = kind === 'fixed' ? 1 : SEGMENTS;
  const segmentMs = windowMs / segments;
  const marks: number[] = [];
  const clocks: number[] = [];
  for (const f of files) {
    for (const line of readFileSync(f, 'utf8').split('\n')) {
      if (line === '') continue;
      const [mark, at] = line.split(',');
      marks.push(Number(mark));
      clocks.push(at === undefined ? Number.NaN : Number(at));
    }
  }
  const grid = Math.min(...marks);
  const per = new Map<number, number>();
  let late = 0;
  let offGrid = 0;
  for (let i = 0; i < marks.length; i++) {
    const s = (marks[i] - grid) / segmentMs;
    if (!Number.isInteger(s)) offGrid++;
    per.set(Math.round(s), (per.get(Math.round(s)) ?? 0) + 1);
    // Made by the clock after its segment ended: a grant outside the window that counted it.
    if (!Number.isNaN(clocks[i]) && clocks[i] >= marks[i] + segmentMs) late++;
  }
  const last = Math.max(...per.keys());
  let worst = 0;
  let windows = 0;
  for (let end = 0; end <= last + segments - 1; end++) {
    let sum = 0;
    for (let j = end - segments + 1; j <= end; j++) sum += per.get(j) ?? 0;
    worst = Math.max(worst, sum);
    windows++;
  }
  return {
    worst: worst / limit,
    windows,
    late,
    offGrid,
    grants: marks.length,
    fullWindows: Math.floor((last + 1) / segments),
  };
}

async function bound(): Promise<void> {
  console.log(
    `\n## Bound: admitted per window ÷ limit, worst window (leases: true, closed loop, window ${WINDOW_MS} ms, ${WINDOWS} windows; one process SIGSTOPped for two windows, one SIGKILLed mid-window)`,
  );
  console.log(
    '| algorithm | N | worst window | windows | grants | made after their window by the clock | errors |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const kind of ['fixed', 'sliding'] as const) {
    for (const n of [4, 8]) {
      const ws = await workers(n);
      const limit = 2000;
      const name = nameOf(`bound-${kind}-${n}`);
      const files = ws.map((_, i) => join(dir, `${name}-${i}`));
      for (const f of files) writeFileSync(f, '');
      const durationMs = WINDOWS * WINDOW_MS;
      const reports = runJobs(ws, (i) => ({
        port: server.port,
        kind,
        mode: 'leases',
        limit,
        windowMs: WINDOW_MS,
        segments: SEGMENTS,
        name,
        durationMs,
        inflight: 8,
        rate: 0,
        file: files[i],
        settleMs: 0,
      }));
      await sleep(durationMs * 0.3);
      ws[1].kill('SIGSTOP');
      await sleep(WINDOW_MS * 1.25);
      ws[2].kill('SIGKILL'); // a quarter into a window of the stopped one's two, wherever the grid lies
      await sleep(WINDOW_MS * 0.75);
      ws[1].kill('SIGCONT');
      const done = await reports;
      const errors = done.reduce((s, r) => s + (r?.errors ?? 0), 0);
      const t = tally(files, kind, limit, WINDOW_MS);
      if (t.offGrid > 0) throw new Error(`${t.offGrid} marks off the window grid`);
      console.log(
        `| ${kind} window${kind === 'sliding' ? ` (${SEGMENTS} segments)` : ''} | ${n} | ${fmt(t.worst)} | ${t.windows} | ${t.grants} | ${t.late} | ${errors} |`,
      );
    }
  }
}

async function cost(kind: 'fixed' | 'bucket' | 'chain' = 'fixed'): Promise<void> {
  const what = { fixed: '', bucket: ', token bucket', chain: ', a chain of two fixed windows' }[kind];
  console.log(
    `\n## Cost${what}: one hot key, every decision a grant, closed loop (64 in flight per process), ${ROUNDS} rounds of ${PHASE_MS} ms per mode, modes alternated`,
  );
  console.log('| N | mode | Redis commands per decision | decisions/s per process | of strict |');
  console.log('|---:|---|---:|---:|---:|');
  for (const n of [4, 8]) {
    const ws = await workers(n);
    const sums = new Map<string, { commands: number; decisions: number; rate: number[] }>();
    for (let round = 0; round < ROUNDS; round++) {
      const modes = ['strict', 'leases', 'auto'] as const;
      for (let k = 0; k < modes.length; k++) {
        const mode = modes[(k + round) % modes.length];
        const name = nameOf(`cost-${kind}-${mode}-${n}`);
        await admin.config('RESETSTAT');
        const reports = await runJobs(ws, () => ({
          port: server.port,
          kind,
          mode,
          limit: 1e9,
          refill: { tokens: 1e9, periodMs: 60_000 },
          windowMs: 60_000,
          segments: 1,
          name,
          durationMs: PHASE_MS,
          inflight: 64,
          rate: 0,
          settleMs: 120,
        }));
        const used = await commands();
        const s = sums.get(mode) ?? { commands: 0, decisions: 0, rate: [] };
        for (const r of reports) {
          if (r === undefined) continue;
          if (r.rejected > 0) throw new Error(`${mode}: ${r.rejected} rejections on a limit no run reaches`);
          s.decisions += r.decisions;
          s.rate.push((r.decisions / r.elapsedMs) * 1000);
        }
        s.commands += used;
        sums.set(mode, s);
      }
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const strict = mean(sums.get('strict')!.rate);
    for (const mode of ['strict', 'leases', 'auto']) {
      const s = sums.get(mode)!;
      const rate = mean(s.rate);
      console.log(
        `| ${n} | ${mode} | ${fmt(s.commands / s.decisions, 4)} | ${Math.round(rate).toLocaleString('en')} | ${fmt(rate / strict, 1)}× |`,
      );
    }
  }
}

async function share(): Promise<void> {
  const windows = SHARE_WINDOWS;
  const windowMs = SHARE_WINDOW_MS;
  console.log(
    `\n## Share: one hot process and seven at 5 decisions/s, leases: true, window ${windowMs} ms, ${windows} windows (the first two and the last not counted)`,
  );
  console.log('| algorithm | hot admitted ÷ limit, full windows | all admitted ÷ limit | worst window |');
  console.log('|---|---:|---:|---:|');
  for (const kind of ['fixed', 'sliding'] as const) {
    const ws = await workers(8);
    const limit = 2000;
    const name = nameOf(`share-${kind}`);
    const files = ws.map((_, i) => join(dir, `${name}-${i}`));
    for (const f of files) writeFileSync(f, '');
    await runJobs(ws, (i) => ({
      port: server.port,
      kind,
      mode: 'leases',
      limit,
      windowMs,
      segments: SEGMENTS,
      name,
      durationMs: windows * windowMs,
      inflight: i === 0 ? 8 : 1,
      rate: i === 0 ? 0 : 5,
      file: files[i],
      settleMs: 0,
    }));
    // Full windows only: from the hot process's first segment to its last, whole windows of segments.
    const segments = kind === 'fixed' ? 1 : SEGMENTS;
    const segmentMs = windowMs / segments;
    const all = tally(files, kind, limit, windowMs);
    const grid = Math.min(
      ...files.flatMap((f) =>
        readFileSync(f, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => Number(l.split(',')[0])),
      ),
    );
    const hotPer = new Map<number, number>();
    for (const line of readFileSync(files[0], 'utf8').split('\n')) {
      if (line === '') continue;
      const s = Math.round((Number(line.split(',')[0]) - grid) / segmentMs);
      hotPer.set(s, (hotPer.get(s) ?? 0) + 1);
    }
    const first = Math.min(...hotPer.keys()) + 2 * segments; // past the first two (warming up)
    const end = Math.max(...hotPer.keys()) - segments; // before the last
    const last = first + Math.floor((end - first + 1) / segments) * segments - 1; // whole windows
    let hot = 0;
    let total = 0;
    const allPer = new Map<number, number>();
    for (const f of files) {
      for (const line of readFileSync(f, 'utf8').split('\n')) {
        if (line === '') continue;
        const s = Math.round((Number(line.split(',')[0]) - grid) / segmentMs);
        allPer.set(s, (allPer.get(s) ?? 0) + 1);
      }
    }
    let count = 0;
    for (let s = first; s <= last; s++) {
      hot += hotPer.get(s) ?? 0;
      total += allPer.get(s) ?? 0;
      count++;
    }
    const capacity = (count / segments) * limit;
    if (process.env.DEBUG) {
      const row = [];
      for (let s = first - segments; s <= last + segments; s++)
        row.push(`${hotPer.get(s) ?? 0}/${allPer.get(s) ?? 0}`);
      console.log(row.join(' '));
    }
    console.log(
      `| ${kind} window${kind === 'sliding' ? ` (${SEGMENTS} segments)` : ''} | ${fmt(hot / capacity)} | ${fmt(total / capacity)} | ${fmt(all.worst)} |`,
    );
  }
}

/**
 * Where `leases: 'auto'` should promote a key: one process deciding one key at a given rate, Redis commands per
 * decision with leases off, forced, and automatic (whose defaults this row is for).
 */
async function threshold(): Promise<void> {
  console.log(
    `\n## Threshold: one process, one key at a given rate, ${PHASE_MS} ms per mode (Redis commands per decision)`,
  );
  console.log('| decisions/s asked | got | strict | leases: true | leases: auto |');
  console.log('|---:|---:|---:|---:|---:|');
  const [w] = await workers(1);
  for (const rate of [20, 50, 100, 200, 500, 1000]) {
    const row: string[] = [];
    let got = 0;
    for (const mode of ['strict', 'leases', 'auto'] as const) {
      await admin.config('RESETSTAT');
      const [r] = await runJobs([w], () => ({
        port: server.port,
        kind: 'fixed',
        mode,
        limit: 1e9,
        windowMs: 60_000,
        segments: 1,
        name: nameOf(`threshold-${mode}-${rate}`),
        durationMs: PHASE_MS,
        inflight: Math.max(1, Math.round(rate / 50)),
        rate,
        settleMs: 120,
      }));
      const used = await commands();
      got = Math.max(got, (r!.decisions / r!.elapsedMs) * 1000);
      row.push(fmt(used / r!.decisions, 2));
    }
    console.log(`| ${rate} | ${Math.round(got)} | ${row.join(' | ')} |`);
  }
}

/**
 * The token bucket's row. Overshoot: N processes on one leased bucket (`tokenLimit` 1 000, 1 token/ms continuous)
 * in cycles of a steady demand at half the refill (the bucket fills, batches stay alive) and a closed-loop burst;
 * one process SIGSTOPped past a batch's life (1 s) and one SIGKILLed. Every grant is written as the machine clock
 * (the one Redis `TIME` reads) before its call and once its lease is here; over every span [s, e] the grants
 * certainly inside it are counted, less what the bucket allows (tokenLimit + the refill over e − s): the worst,
 * against the stated bound (1 % of tokenLimit, floored). Cost: as the cost section, on a bucket no run empties.
 */
async function bucket(): Promise<void> {
  const tokenLimit = 1000;
  const perMs = 1;
  const reserve = Math.floor(tokenLimit / 100);
  const cycle = { coolMs: 1200, hotMs: 300 };
  const cycles = 3;
  console.log(
    `\n## Token bucket: worst overshoot over any span (leases: true, tokenLimit ${tokenLimit}, ${perMs} token/ms continuous; ${cycles} cycles of ${cycle.coolMs} ms at half the refill then ${cycle.hotMs} ms closed loop; one process SIGSTOPped 1.3 s, one SIGKILLed)`,
  );
  console.log(
    '| N | worst overshoot, tokens | bound (1 % of tokenLimit) | grants | decisions | Redis commands per decision | per grant | errors |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
  console.log("(decisions: the survivors'; commands: every process's, the killed one's included)");
  for (const n of [4, 8]) {
    const ws = await workers(n);
    const name = nameOf(`bucket-${n}`);
    const files = ws.map((_, i) => join(dir, `${name}-${i}`));
    for (const f of files) writeFileSync(f, '');
    const inflight = 8;
    const startAt = Date.now() + 200;
    const durationMs = cycles * (cycle.coolMs + cycle.hotMs);
    await admin.config('RESETSTAT');
    const reports = runJobs(ws, (i) => ({
      port: server.port,
      kind: 'bucket',
      mode: 'leases',
      limit: tokenLimit,
      windowMs: 0,
      segments: 1,
      name,
      durationMs,
      inflight,
      rate: 0,
      file: files[i],
      settleMs: 0,
      refill: { tokens: 100, periodMs: 100 / perMs },
      // Half the refill over the fleet while cool.
      cycle: { startAt, ...cycle, coolEveryMs: (2 * n * inflight) / perMs },
    }));
    // Stopped in the second cycle's steady phase, woken in the third's (past its batch's life); one killed meanwhile.
    await sleep(200 + cycle.coolMs + cycle.hotMs + 300);
    ws[1].kill('SIGSTOP');
    await sleep(600);
    ws[2].kill('SIGKILL');
    await sleep(700);
    ws[1].kill('SIGCONT');
    const done = await reports;
    const used = await commands();
    const grants: [number, number][] = [];
    for (const f of files) {
      for (const line of readFileSync(f, 'utf8').split('\n')) {
        if (line === '') continue;
        const [lo, hi] = line.split(',').map(Number);
        grants.push([lo, hi]);
      }
    }
    const worst = worstOvershoot(grants, tokenLimit, perMs);
    const decisions = done.reduce((s, r) => s + (r?.decisions ?? 0), 0);
    const errors = done.reduce((s, r) => s + (r?.errors ?? 0), 0);
    console.log(
      `| ${n} | ${fmt(worst, 1)} | ${reserve} | ${grants.length} | ${decisions} | ${fmt(used / decisions, 4)} | ${fmt(used / grants.length, 2)} | ${errors} |`,
    );
  }
  await cost('bucket');
}

const started = Date.now();
console.log(
  `# bench:redis:leases — ${new Date().toISOString()}, ${cpus().length} CPUs, load ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}, Node ${process.version}, redis-server on port ${server.port}`,
);
try {
  if (!ONLY || ONLY === 'bound') await bound();
  if (!ONLY || ONLY === 'cost') await cost();
  if (!ONLY || ONLY === 'share') await share();
  if (!ONLY || ONLY === 'threshold') await threshold();
  if (!ONLY || ONLY === 'bucket') await bucket();
  if (!ONLY || ONLY === 'chain') await cost('chain');
} finally {
  admin.disconnect();
  for (const child of children) child.kill('SIGKILL');
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s, load ${loadavg()[0].toFixed(1)})`);
process.exit(0);
