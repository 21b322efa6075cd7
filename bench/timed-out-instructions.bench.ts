/**
 * What a timed-out Express request costs over one its handler answers, in instructions (callgrind), which no
 * other load on the machine can move — CPU time on this VM could not resolve it (−3 to +31 µs over eight runs).
 *
 *   npm run bench:timed-out
 *   RUNS=3 BURST=500 BATCH=20 WARM=8 MEASURE=9 LATE_MS=3000 NATIVE=9
 *   V8_FLAGS='--single-threaded --no-memory-reducer' (the defaults)
 *
 * Each run starts one child per kind (`in-time`: a 10 s deadline; `timed-out`: a 20 ms one) side by side under
 * `valgrind --tool=callgrind` (instruction counts do not depend on what else runs). The child
 * (bench/timed-out-child.mjs, plain JavaScript: tsx's loader thread would be counted too) is the Express app of
 * `bench:timeouts`'s timed-out table: every handler writes LATE_MS after it ran (by `performance.now()`, not the
 * event loop's clock), after the 504 when timed out, so the write is dropped (3 s rather than 200 ms: under
 * valgrind a burst outlasts 200 ms). It takes WARM bursts of BURST requests (injected BATCH at a time) to reach
 * optimised code, then MEASURE bursts, each counted on its own: a full garbage collection, `callgrind_control
 * --zero`, the burst (until every response finished and every handler's write came), `--dump`. A kind's figure is
 * the median of its bursts (a burst where a request got another status than its kind's is left out and
 * reported; more than half of them fail the run). Earlier versions counted six bursts as one and gave +64 000 to
 * +147 000 instructions per request for the same code: a major collection, V8's compiler threads or tsx's loader
 * thread fell into the count or not. Now V8 runs single-threaded (its compiler and collector work on the main
 * thread, where it is counted in the burst that causes it), the memory reducer does not collect while the child
 * waits for its timers, and the median drops the burst that took a major collection.
 *
 * `FLOODGATE_DIST=/path/to/dist` measures another build of floodgate (an older commit's, to compare).
 *
 * Instructions per µs come from the same child run natively with the same flags (CPU µs per request of its
 * in-time bursts, NATIVE of them after WARM), so the difference reads in µs. That rate moves with the machine's
 * load; the instruction counts do not.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { median } from './http-runner.ts';

const LATE_MS = Number(process.env.LATE_MS ?? 3000);
const BURST = Number(process.env.BURST ?? 500);
const BATCH = Number(process.env.BATCH ?? 20);
const V8_FLAGS = (process.env.V8_FLAGS ?? '--single-threaded --no-memory-reducer').split(' ').filter(Boolean);
const CHILD = new URL('./timed-out-child.mjs', import.meta.url).pathname;

type Kind = 'in-time' | 'timed-out';

interface Running {
  send(line: string): void;
  next(): Promise<string>;
  pid: number;
  exited: Promise<unknown>;
}

function start(kind: Kind, dir: string | undefined): Running {
  const node = [
    process.execPath,
    '--expose-gc',
    ...V8_FLAGS,
    CHILD,
    kind,
    String(BURST),
    String(LATE_MS),
    String(BATCH),
  ];
  const args =
    dir === undefined
      ? node
      : [
          'valgrind',
          '--tool=callgrind',
          // V8 writes the code it runs: valgrind must notice code changing on the heap.
          '--smc-check=all-non-file',
          `--callgrind-out-file=${join(dir, 'out.%p')}`,
          ...node,
        ];
  const proc = spawn(args[0], args.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting: Array<(line: string) => void> = [];
  const buffered: string[] = [];
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    const resolve = waiting.shift();
    if (resolve) resolve(line);
    else buffered.push(line);
  });
  return {
    send: (line) => proc.stdin!.write(`${line}\n`),
    next: () =>
      buffered.length > 0
        ? Promise.resolve(buffered.shift()!)
        : new Promise((resolve) => waiting.push(resolve)),
    pid: proc.pid!,
    exited: new Promise((resolve) => proc.once('exit', resolve)),
  };
}

async function burst(running: Running): Promise<{ us: number; statuses: string }> {
  running.send('go');
  const line = await running.next();
  const [, us, ...statuses] = line.split(' ');
  if (!line.startsWith('done')) throw new Error(`unexpected: ${line}`);
  return { us: Number(us), statuses: statuses.join(' ') };
}

async function collect(running: Running): Promise<void> {
  running.send('gc');
  if ((await running.next()) !== 'gc') throw new Error('child did not collect');
}

/**
 * Instructions per request of each measured burst of one child under callgrind whose every request got its
 * kind's status, and how many bursts were left out for a stray status.
 */
async function instructions(
  kind: Kind,
  warm: number,
  measure: number,
): Promise<{ perBurst: number[]; strays: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-timedout-'));
  const running = start(kind, dir);
  if ((await running.next()) !== 'ready') throw new Error('child did not start');
  for (let i = 0; i < warm; i++) await burst(running);
  const expected = `${kind === 'in-time' ? 200 : 504}×${BURST}`;
  const valid: boolean[] = [];
  const strays: string[] = [];
  for (let i = 0; i < measure; i++) {
    await collect(running);
    execFileSync('callgrind_control', ['--zero', String(running.pid)], { stdio: 'ignore' });
    const { statuses } = await burst(running);
    execFileSync('callgrind_control', ['--dump', String(running.pid)], { stdio: 'ignore' });
    // Under valgrind on a machine at load 15-20 a few handlers of a timed-out burst answered 200 (18 of 500
    // once): such a burst measures something else, and is left out.
    valid.push(statuses === expected);
    if (statuses !== expected) strays.push(statuses);
  }
  if (strays.length > measure / 2) throw new Error(`${kind}: ${strays.join(' | ')}, expected ${expected}`);
  running.send('exit');
  await running.exited;
  const perBurst: number[] = [];
  // Dumps are numbered in order: out.<pid>.1 … out.<pid>.<measure> (the final one at exit has no number).
  for (let i = 1; i <= measure; i++) {
    const dumped = readdirSync(dir).find((f) => f.endsWith(`.${i}`));
    if (dumped === undefined) throw new Error(`no callgrind dump ${i} in ${dir}`);
    const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, dumped), 'utf8'));
    if (totals === null) throw new Error(`no totals in ${join(dir, dumped)}`);
    if (valid[i - 1]) perBurst.push(Number(totals[1]) / BURST);
  }
  return { perBurst, strays };
}

const k = (n: number): string => `${(n / 1000).toFixed(1)}k`;

async function main(): Promise<void> {
  const runs = Number(process.env.RUNS ?? 3);
  const warm = Number(process.env.WARM ?? 8);
  const measure = Number(process.env.MEASURE ?? 9);
  const differences: number[] = [];
  const inTimeCounts: number[] = [];
  for (let run = 0; run < runs; run++) {
    const counts = new Map<Kind, number>();
    await Promise.all(
      (['in-time', 'timed-out'] as const).map(async (kind) => {
        const { perBurst, strays } = await instructions(kind, warm, measure);
        counts.set(kind, median(perBurst));
        const sorted = [...perBurst].sort((a, b) => a - b);
        process.stderr.write(
          `run ${run + 1} ${kind}: median ${k(median(perBurst))} instructions/request over ${perBurst.length} bursts ` +
            `(${k(sorted[0])}–${k(sorted[sorted.length - 1])}): ${perBurst.map(k).join(' ')}` +
            `${strays.length > 0 ? `; left out: ${strays.join(' | ')}` : ''}\n`,
        );
      }),
    );
    inTimeCounts.push(counts.get('in-time')!);
    differences.push(counts.get('timed-out')! - counts.get('in-time')!);
  }

  // Instructions per µs of this same child, natively: CPU µs per request of its in-time bursts.
  const native = start('in-time', undefined);
  if ((await native.next()) !== 'ready') throw new Error('child did not start');
  for (let i = 0; i < warm; i++) await burst(native);
  const us: number[] = [];
  for (let i = 0; i < Number(process.env.NATIVE ?? 9); i++) {
    await collect(native);
    us.push((await burst(native)).us);
  }
  native.send('exit');
  await native.exited;
  const perUs = median(inTimeCounts) / median(us);
  const fastest = median(inTimeCounts) / Math.min(...us);

  console.log(
    `\nExpress, timed-out vs answered in time: instructions per request (callgrind), median of ${measure} bursts ` +
      `of ${BURST} at once after ${warm} warm-up bursts, ${runs} runs, Node ${process.version}, ${V8_FLAGS.join(' ')}`,
  );
  console.log(`in-time: ${inTimeCounts.map(k).join(', ')}`);
  console.log(`difference (timed-out − in-time): ${differences.map(k).join(', ')}`);
  console.log(
    `native in-time CPU per request: ${us.map((n) => n.toFixed(2)).join(', ')} µs (median ${median(us).toFixed(2)})` +
      ` → ${perUs.toFixed(0)} instructions per µs (${fastest.toFixed(0)} at the fastest burst)`,
  );
  const sorted = [...differences].sort((a, b) => a - b);
  console.log(
    `difference in µs: median ${(median(differences) / perUs).toFixed(2)}, range ` +
      `${(sorted[0] / perUs).toFixed(2)} to ${(sorted[sorted.length - 1] / perUs).toFixed(2)}` +
      ` (at the fastest burst's rate: median ${(median(differences) / fastest).toFixed(2)})`,
  );
}

await main();
