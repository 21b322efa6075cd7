/**
 * What a timed-out Express request costs over one its handler answers, in instructions (callgrind), which no
 * other load on the machine can move — CPU time on this VM could not resolve it (−3 to +31 µs over eight runs).
 *
 *   npm run bench:timed-out
 *   RUNS=3 BURST=500 WARM=6 MEASURE=6 LATE_MS=3000 (defaults)
 *
 * Each run starts one child per kind (`in-time`: a 10 s deadline; `timed-out`: a 20 ms one), alternating, under
 * `valgrind --tool=callgrind`. The child builds the same Express app as `bench:timeouts`'s timed-out table (every
 * handler writes at LATE_MS: after the 504 when timed out, so the write is dropped; 3 s rather than 200 ms, since
 * under valgrind a burst outlasts 200 ms and some handlers then answered before their 20 ms deadline was seen),
 * injects WARM bursts of BURST requests to reach optimised code (V8's compilers run on threads callgrind counts
 * too), then a full garbage collection and MEASURE bursts between `callgrind_control --zero` and `--dump` (one
 * burst gave ±100 000 instructions per request, as one major collection falls into it or not), each ending
 * when every response finished and every handler's write came. The two kinds of a run are measured side by side (instruction counts
 * do not depend on what else runs); a timed-out burst where any request got other than a 504 fails the run. Instructions per µs come from the same
 * child run natively (CPU µs per request of the in-time burst, median of 7), so the difference reads in µs.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { builtAdapters, inject, type Listener, median } from './http-runner.ts';

const DEADLINE_MS = 20;
const IN_TIME_MS = 10_000;
const LATE_MS = Number(process.env.LATE_MS ?? 3000);
const BURST = Number(process.env.BURST ?? 500);

type Kind = 'in-time' | 'timed-out';

if (process.argv[2] === '--child') await child(process.argv[3] as Kind);
else await main();

// ---- the child: one Express app, bursts on command ----

async function child(kind: Kind): Promise<void> {
  const express = (await import('express')).default;
  const floodgate = await builtAdapters();
  let wrote = 0;
  const app = express();
  app.use(
    floodgate.express.requestTimeouts({ default: kind === 'in-time' ? IN_TIME_MS : DEADLINE_MS }) as never,
  );
  app.get('/', (_req, res) => {
    setTimeout(() => {
      res.send('late or not');
      wrote++;
    }, LATE_MS);
  });
  const listener = http.createServer(app).listeners('request')[0] as Listener;

  const burst = async (): Promise<{ us: number; statuses: string }> => {
    const seen = new Map<number, number>();
    let finished = 0;
    wrote = 0;
    const start = process.cpuUsage();
    for (let i = 0; i < BURST; i += 100) {
      for (let j = i; j < Math.min(BURST, i + 100); j++) {
        inject(listener, (status) => {
          seen.set(status, (seen.get(status) ?? 0) + 1);
          finished++;
        });
      }
      await new Promise(setImmediate);
    }
    while (finished < BURST || wrote < BURST) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise(setImmediate);
    const used = process.cpuUsage(start);
    return {
      us: (used.user + used.system) / BURST,
      statuses: [...seen].map(([status, n]) => `${status}×${n}`).join(' '),
    };
  };

  const lines = createInterface({ input: process.stdin });
  console.log('ready');
  for await (const line of lines) {
    if (line === 'exit') break;
    if (line === 'gc') {
      (globalThis as { gc?: () => void }).gc?.();
      console.log('gc');
      continue;
    }
    const result = await burst();
    console.log(`done ${result.us} ${result.statuses}`);
  }
  lines.close();
  process.exit(0);
}

// ---- the parent ----

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
    '--import',
    'tsx',
    new URL(import.meta.url).pathname,
    '--child',
    kind,
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

async function instructions(
  kind: Kind,
  warm: number,
  measure: number,
): Promise<{ perRequest: number; statuses: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-timedout-'));
  const running = start(kind, dir);
  if ((await running.next()) !== 'ready') throw new Error('child did not start');
  for (let i = 0; i < warm; i++) await burst(running);
  running.send('gc');
  if ((await running.next()) !== 'gc') throw new Error('child did not collect');
  execFileSync('callgrind_control', ['--zero', String(running.pid)], { stdio: 'ignore' });
  const seen = new Set<string>();
  for (let i = 0; i < measure; i++) seen.add((await burst(running)).statuses);
  execFileSync('callgrind_control', ['--dump', String(running.pid)], { stdio: 'ignore' });
  const statuses = [...seen].join(' | ');
  running.send('exit');
  await running.exited;
  const dumped = readdirSync(dir).find((f) => f.endsWith('.1'));
  if (dumped === undefined) throw new Error(`no callgrind dump in ${dir}`);
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, dumped), 'utf8'));
  if (totals === null) throw new Error(`no totals in ${join(dir, dumped)}`);
  return { perRequest: Number(totals[1]) / (BURST * measure), statuses };
}

async function main(): Promise<void> {
  const runs = Number(process.env.RUNS ?? 3);
  const warm = Number(process.env.WARM ?? 6);
  const measure = Number(process.env.MEASURE ?? 6);
  const differences: number[] = [];
  const inTimeCounts: number[] = [];
  for (let run = 0; run < runs; run++) {
    const order: Kind[] = run % 2 === 0 ? ['in-time', 'timed-out'] : ['timed-out', 'in-time'];
    const counts = new Map<Kind, number>();
    await Promise.all(
      order.map(async (kind) => {
        const { perRequest, statuses } = await instructions(kind, warm, measure);
        counts.set(kind, perRequest);
        process.stderr.write(
          `run ${run + 1} ${kind}: ${perRequest.toFixed(0)} instructions/request (${statuses})\n`,
        );
        const expected = `${kind === 'in-time' ? 200 : 504}×${BURST}`;
        if (statuses !== expected) throw new Error(`${kind}: ${statuses}, expected ${expected}`);
      }),
    );
    inTimeCounts.push(counts.get('in-time')!);
    differences.push(counts.get('timed-out')! - counts.get('in-time')!);
  }

  // Instructions per µs of this same child, natively: CPU µs per request of its in-time burst.
  const native = start('in-time', undefined);
  if ((await native.next()) !== 'ready') throw new Error('child did not start');
  for (let i = 0; i < warm; i++) await burst(native);
  const us: number[] = [];
  for (let i = 0; i < 7; i++) us.push((await burst(native)).us);
  native.send('exit');
  await native.exited;
  const perUs = median(inTimeCounts) / median(us);

  console.log(
    `\nExpress, timed-out vs answered in time: instructions per request (callgrind), ${measure} bursts of ${BURST} at ` +
      `once after ${warm} warm-up bursts, ${runs} runs, Node ${process.version}`,
  );
  console.log(`in-time: ${inTimeCounts.map((n) => n.toFixed(0)).join(', ')}`);
  console.log(`difference (timed-out − in-time): ${differences.map((n) => n.toFixed(0)).join(', ')}`);
  console.log(
    `native in-time CPU per request: ${us.map((n) => n.toFixed(2)).join(', ')} µs (median ${median(us).toFixed(2)})` +
      ` → ${perUs.toFixed(0)} instructions per µs`,
  );
  const sorted = [...differences].sort((a, b) => a - b);
  console.log(
    `difference in µs: median ${(median(differences) / perUs).toFixed(2)}, range ` +
      `${(sorted[0] / perUs).toFixed(2)} to ${(sorted[sorted.length - 1] / perUs).toFixed(2)}`,
  );
}
