/**
 * `INPROC=1 INSTRUCTIONS=1 npm run bench:http`: the in-process measure (a real `IncomingMessage`/`ServerResponse`
 * on a socket that discards what is written, no kernel, no load generator) counted in instructions under
 * `valgrind --tool=callgrind`, which the other work on this machine cannot move: CPU time per request on this
 * loaded 2-core VM moved ±10 % between identical builds in one alternating run, more than the differences asked of it.
 *
 * Each contender runs in its own child under callgrind, takes WARM batches of BATCH requests (its code reaches
 * V8's optimising compilers; their threads are counted too), a full garbage collection, then MEASURE batches
 * between `callgrind_control --zero` and `--dump`. PARALLEL children at once (counts do not depend on load).
 * PERF_MAP=1 has V8 write /tmp/perf-<pid>.map, so the JIT addresses in the dumps (kept, printed per contender)
 * can be named.
 *
 * What it resolves, 1 December 2026 (node:http, 3 batches of 3000 after 3): about ±2 000 instructions per request
 * between runs of one build (the GC's scavenges fall into a batch or not; 'headers: []' once counted below bare),
 * against 17 000–19 000 that floodgate adds with its header fields. Under valgrind V8 tiers up later: with too
 * few warm-up requests `PERF_MAP=1` shows hot functions still in baseline code (`^decide`), so warm longer
 * than the defaults before trusting a difference of a few per cent. Each contender takes minutes.
 *
 *   WARM=6 MEASURE=4 BATCH=3000 PARALLEL=2 FRAMEWORKS=node,fastify (defaults: all four frameworks)
 *   ONLY=floodgate (contenders by name, comma-separated)   PERF_MAP=1 (see below)
 *   SINGLE_THREADED=1 (compiler and GC on the main thread, counted: see below)
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import type http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { inject, type Listener, type RunOptions, type Variant } from './http-runner.ts';

const BATCH = Number(process.env.BATCH ?? 3000);

/** The child: one contender's listener, a batch of requests per `go` line. */
export async function inProcessChild(options: RunOptions, framework: string, name: string): Promise<void> {
  const variant = (await options.variants()).find((v) => v.framework === framework && v.name === name);
  if (variant === undefined) throw new Error(`no variant ${framework} / ${name}`);
  const server: http.Server = await variant.start();
  const listener = server.listeners('request')[0] as Listener;
  const lines = createInterface({ input: process.stdin });
  console.log('ready');
  for await (const line of lines) {
    if (line === 'exit') break;
    if (line === 'gc') {
      (globalThis as { gc?: () => void }).gc?.();
      console.log('gc');
      continue;
    }
    const seen = new Map<number, number>();
    let finished = 0;
    for (let i = 0; i < BATCH; i += 100) {
      for (let j = 0; j < 100; j++) {
        inject(listener, (status) => {
          seen.set(status, (seen.get(status) ?? 0) + 1);
          finished++;
        });
      }
      await new Promise(setImmediate);
    }
    while (finished < BATCH) await new Promise(setImmediate);
    console.log(`done ${[...seen].map(([status, n]) => `${status}×${n}`).join(' ')}`);
  }
  lines.close();
  server.close();
  process.exit(0);
}

async function count(file: string, v: Variant, warm: number, measure: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-inproc-'));
  const proc = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      // V8 writes the code it runs: valgrind must notice code changing on the heap.
      '--smc-check=all-non-file',
      // One file per thread: only the main thread's count is read, V8's compiler and GC helper threads
      // (which run when they are scheduled, not when the requests are) are left out.
      '--separate-threads=yes',
      `--callgrind-out-file=${join(dir, 'out.%p')}`,
      process.execPath,
      '--expose-gc',
      // SINGLE_THREADED=1: V8 compiles and collects on the main thread, so both are counted. Tried 1 December
      // 2026: TurboFan was still compiling in the measured batches (~20 k instructions a request, in every
      // contender), so the default leaves the background threads out of the count instead.
      ...(process.env.SINGLE_THREADED === '1' ? ['--single-threaded'] : []),
      // PERF_MAP=1: V8 writes /tmp/perf-<pid>.map, which names the JIT code callgrind shows as bare addresses.
      ...(process.env.PERF_MAP === '1' ? ['--perf-basic-prof'] : []),
      '--import',
      'tsx',
      new URL(file).pathname,
      '--inproc-child',
      v.framework,
      v.name,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const waiting: Array<(line: string) => void> = [];
  createInterface({ input: proc.stdout! }).on('line', (line) => waiting.shift()?.(line));
  const ask = (line: string | undefined): Promise<string> =>
    new Promise((resolve) => {
      waiting.push(resolve);
      if (line !== undefined) proc.stdin!.write(`${line}\n`);
    });
  if ((await ask(undefined)) !== 'ready') throw new Error(`${v.framework} / ${v.name} did not start`);
  for (let i = 0; i < warm; i++) await ask('go');
  await ask('gc');
  execFileSync('callgrind_control', ['--zero', String(proc.pid)], { stdio: 'ignore' });
  for (let i = 0; i < measure; i++) {
    const line = await ask('go');
    if (!/^done 200×\d+$/.test(line)) throw new Error(`${v.framework} / ${v.name}: ${line}`);
  }
  execFileSync('callgrind_control', ['--dump', String(proc.pid)], { stdio: 'ignore' });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.stdin!.write('exit\n');
  await exited;
  const dumped = readdirSync(dir).find((f) => f.endsWith('.1-01'));
  if (dumped === undefined) throw new Error(`no callgrind dump in ${dir}`);
  process.stderr.write(`${v.framework} / ${v.name}: ${join(dir, dumped)}\n`);
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, dumped), 'utf8'));
  if (totals === null) throw new Error(`no totals in ${join(dir, dumped)}`);
  return Number(totals[1]) / (BATCH * measure);
}

/** The parent: every contender counted, then instructions added per request and the ratios the issue asks for. */
export async function inProcessInstructions(options: RunOptions): Promise<void> {
  const frameworks = (process.env.FRAMEWORKS ?? 'node,express,fastify,hono').split(',');
  const warm = Number(process.env.WARM ?? 6);
  const measure = Number(process.env.MEASURE ?? 4);
  const parallel = Number(process.env.PARALLEL ?? 2);
  // Names hold ', ' ('two fields, no limiter'): contenders are split at commas not followed by a space.
  const only = process.env.ONLY?.split(/,(?! )/);
  const chosen = (await options.variants()).filter(
    (v) => frameworks.includes(v.framework) && (only === undefined || only.includes(v.name)),
  );
  const counts = new Map<Variant, number>();
  const queue = [...chosen];
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      for (let v = queue.shift(); v !== undefined; v = queue.shift()) {
        counts.set(v, await count(options.file, v, warm, measure));
        process.stderr.write(`${v.framework} / ${v.name}: ${counts.get(v)!.toFixed(0)} instructions\n`);
      }
    }),
  );
  console.log(
    `\n${options.title}: instructions per request in process (callgrind, no sockets), ${measure} batches of ` +
      `${BATCH} after ${warm} warm-up batches, Node ${process.version}`,
  );
  console.log('framework contender                  instructions     added');
  for (const framework of frameworks) {
    const group = chosen.filter((v) => v.framework === framework);
    const bareVariant = group.find((v) => v.name === 'bare');
    if (bareVariant === undefined) {
      for (const v of group)
        console.log(`${framework.padEnd(9)} ${v.name.padEnd(23)} ${counts.get(v)!.toFixed(0).padStart(14)}`);
      continue;
    }
    const bare = counts.get(bareVariant)!;
    const added = (name: string): number | undefined => {
      const v = group.find((c) => c.name === name);
      return v === undefined ? undefined : counts.get(v)! - bare;
    };
    for (const v of group) {
      const n = counts.get(v)!;
      console.log(
        `${framework.padEnd(9)} ${v.name.padEnd(23)} ${n.toFixed(0).padStart(14)} ${(n - bare).toFixed(0).padStart(9)}`,
      );
    }
    const ours = added('floodgate');
    if (ours === undefined) continue;
    const usual = group.find(
      (v) =>
        !['bare', 'no-op middleware', 'no-op hook'].includes(v.name) &&
        !v.name.startsWith('floodgate') &&
        !v.name.endsWith(', no limiter'),
    );
    const floor = added('two fields, no limiter');
    const parts = floor === undefined ? [] : [`added ×${(ours / floor).toFixed(2)} the two-fields floor`];
    if (usual !== undefined) parts.push(`×${(ours / (counts.get(usual)! - bare)).toFixed(2)} ${usual.name}`);
    const base = added('floodgate (baseline)');
    if (base !== undefined) {
      const total = counts.get(group.find((v) => v.name === 'floodgate')!)!;
      const baseTotal = counts.get(group.find((v) => v.name === 'floodgate (baseline)')!)!;
      parts.push(
        `×${(ours / base).toFixed(3)} the baseline's added (total ×${(total / baseTotal).toFixed(3)})`,
      );
    }
    console.log(`${framework.padEnd(9)} floodgate: ${parts.join(', ')}`);
  }
}
