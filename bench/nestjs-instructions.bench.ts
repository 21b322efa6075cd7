/**
 * Instructions per request of Nest's contenders (bench/nestjs-apps.ts), counted by callgrind, in process: no
 * socket, no load generator, and a count that no other load on the machine can move (CPU time on this shared
 * 2-core VM moves by ±20 % between identical runs).
 *
 *   npm run bench:nestjs:instructions                 # hot key: nearly every request rejected (429)
 *   HOT=0 npm run bench:nestjs:instructions           # nothing rejected (limit 10^9/min)
 *   WARM=6000 MEASURE=3000 PARALLEL=2 (defaults); CONTENDERS=bare,floodgate,@nestjs/throttler picks some
 *
 * Each contender runs in its own child under `valgrind --tool=callgrind`: its request listener is called in
 * process with real IncomingMessage/ServerResponse objects (bench/http-runner.ts's inject), WARM requests to
 * reach optimised code, a full garbage collection, then MEASURE requests between `callgrind_control --zero` and
 * `--dump`. Added instructions are over bare Nest's.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { inject, type Listener } from './http-runner.ts';
import { nestVariants } from './nestjs-apps.ts';

const HOT = process.env.HOT !== '0';
const LIMIT = HOT ? 100 : 1_000_000_000;
const WARM = Number(process.env.WARM ?? 6000);
const MEASURE = Number(process.env.MEASURE ?? 3000);
const PARALLEL = Number(process.env.PARALLEL ?? 2);

/** Sends `count` requests in turns of 100 and resolves when every response has finished. */
function requests(listener: Listener, count: number): Promise<void> {
  return new Promise((resolve) => {
    let done = 0;
    const finished = (): void => {
      if (++done === count) resolve();
    };
    for (let i = 0; i < count; i += 100) {
      setImmediate(() => {
        for (let j = 0; j < 100 && i + j < count; j++) inject(listener, finished);
      });
    }
  });
}

async function child(name: string): Promise<void> {
  const variant = (await nestVariants(LIMIT, { storage: true })).find((v) => v.name === name);
  if (variant === undefined) throw new Error(`no contender ${name}`);
  const listener = (await variant.start()).listeners('request')[0] as Listener;
  for (let i = 0; i < WARM; i += 500) await requests(listener, 500);
  (globalThis as { gc?: () => void }).gc?.();
  console.log('zero');
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'go') {
      await requests(listener, MEASURE);
      console.log('dump');
    } else if (line === 'exit') process.exit(0);
  }
}

async function count(name: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-callgrind-'));
  const args = [
    '--tool=callgrind',
    // V8 writes the code it runs: valgrind must notice code changing on the heap.
    '--smc-check=all-non-file',
    `--callgrind-out-file=${join(dir, 'out.%p')}`,
    process.execPath,
    '--expose-gc',
    '--import',
    'tsx',
    new URL(import.meta.url).pathname,
    '--child',
    name,
  ];
  const valgrind = spawn('valgrind', args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  valgrind.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk;
  });
  const exited = new Promise((resolve) => valgrind.once('exit', resolve));
  for await (const line of createInterface({ input: valgrind.stdout })) {
    if (line === 'zero') {
      execFileSync('callgrind_control', ['--zero', String(valgrind.pid)], { stdio: 'ignore' });
      valgrind.stdin.write('go\n');
    } else if (line === 'dump') {
      execFileSync('callgrind_control', ['--dump', String(valgrind.pid)], { stdio: 'ignore' });
      valgrind.stdin.write('exit\n');
      break;
    }
  }
  await exited;
  // The --dump file is the first numbered part.
  const dumped = readdirSync(dir).find((f) => f.endsWith('.1'));
  if (dumped === undefined) throw new Error(`${name}: no callgrind dump: ${stderr.slice(-2000)}`);
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, dumped), 'utf8'));
  if (totals === null) throw new Error(`${name}: no totals in ${join(dir, dumped)}`);
  return Number(totals[1]) / MEASURE;
}

if (process.argv[2] === '--child') {
  await child(process.argv[3]);
} else {
  const picked = process.env.CONTENDERS?.split(',');
  const names = (await nestVariants(LIMIT, { storage: true }))
    .map((v) => v.name)
    .filter((name) => picked === undefined || name === 'bare' || picked.includes(name));
  const queue = [...names];
  const counts = new Map<string, number>();
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
        counts.set(name, await count(name));
        process.stderr.write(`${name}: ${counts.get(name)!.toFixed(0)} instructions\n`);
      }
    }),
  );
  const bare = counts.get('bare')!;
  const throttler = counts.get('@nestjs/throttler') ?? Number.NaN;
  console.log(
    `\nNestJS (Express), ${HOT ? 'HOT KEY (limit 100/min, nearly all rejected)' : 'nothing rejected'}: user-space ` +
      `instructions per request (callgrind, in process), after ${WARM} warm-up requests, over ${MEASURE}, Node ${process.version}`,
  );
  console.log(
    'contender                                         instructions    added   added / @nestjs/throttler',
  );
  for (const name of names) {
    const n = counts.get(name)!;
    console.log(
      `${name.padEnd(48)} ${n.toFixed(0).padStart(13)} ${(n - bare).toFixed(0).padStart(8)} ${((n - bare) / (throttler - bare)).toFixed(3).padStart(12)}`,
    );
  }
}
