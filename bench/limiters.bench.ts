/**
 * Decisions per key, floodgate beside its peers, in one run, alternating, medians.
 *   npm run bench            (builds, then this file; then heap bytes per partition in child processes)
 *
 * floodgate is imported from `dist/`, the build users install, not from `src/` through tsx: tsx compiles with
 * esbuild's `keepNames`, whose `name` redefined on every class made each decision 5-7× slower than the build
 * (6 December 2026: 343-638 ns against 54-59 ns a hot-key decision), and every figure taken that way measured the
 * transpiler, not floodgate.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { MemoryStore } from 'express-rate-limit';
import { TokenBucket } from 'limiter';
import pLimit from 'p-limit';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type * as Floodgate from '../src/index.ts';
import { compare, print } from './harness.ts';

// Typed by src (a fresh clone has no dist/ to typecheck against), run from the build.
const dist = new URL('../dist/index.js', import.meta.url).href;
const { concurrency, fixedWindow, partitioned, slidingWindow, tokenBucket } = (await import(
  dist
)) as typeof Floodgate;

const N = 200_000;
const HUGE = 1_000_000_000; // nothing is rejected: every contender takes its grant path
const keys = Array.from({ length: 100_000 }, () => randomUUID());

function ercStore(): MemoryStore {
  const store = new MemoryStore();
  store.init({ windowMs: 60_000 } as never);
  return store;
}

function floodgate(name: string, spec: Parameters<typeof partitioned<string>>[0]['limiter'], many: boolean) {
  const limiter = partitioned({ key: (k: string) => k, limiter: spec, maxPartitions: 1_000_000 });
  let i = 0;
  return {
    name,
    run(n: number) {
      if (!many) for (let j = 0; j < n; j++) limiter.tryAcquire('hot-key');
      else for (let j = 0; j < n; j++) limiter.tryAcquire(keys[i++ % keys.length]);
    },
  };
}

function peers(many: boolean) {
  const erl = ercStore();
  const rlf = new RateLimiterMemory({ points: HUGE, duration: 60 });
  let i = 0;
  const key = () => (many ? keys[i++ % keys.length] : 'hot-key');
  return [
    {
      name: 'express-rate-limit MemoryStore.increment',
      async run(n: number) {
        for (let j = 0; j < n; j++) await erl.increment(key());
      },
    },
    {
      name: 'rate-limiter-flexible RateLimiterMemory',
      async run(n: number) {
        for (let j = 0; j < n; j++) await rlf.consume(key());
      },
    },
  ];
}

const fw = () => fixedWindow({ permitLimit: HUGE, window: '1m' });
const sw = () => slidingWindow({ permitLimit: HUGE, window: '1m', segmentsPerWindow: 6 });
const tb = () => tokenBucket({ tokenLimit: HUGE, tokensPerPeriod: HUGE, period: '1s' });

const plainFw = fw();
const bucket = new TokenBucket({ bucketSize: HUGE, tokensPerInterval: HUGE, interval: 'second' });
const hot = await compare(
  [
    floodgate('floodgate fixedWindow (partitioned)', fw(), false),
    floodgate('floodgate slidingWindow (partitioned)', sw(), false),
    floodgate('floodgate tokenBucket (partitioned)', tb(), false),
    { name: 'floodgate fixedWindow (one limiter)', run: (n) => void loop(n, () => plainFw.tryAcquire()) },
    {
      name: 'limiter TokenBucket.tryRemoveTokens',
      run: (n) => void loop(n, () => bucket.tryRemoveTokens(1)),
    },
    ...peers(false),
  ],
  N,
);
print(
  'Hot key: one decision (ns/op, median of 7 alternating rounds)',
  hot,
  'express-rate-limit MemoryStore.increment',
);

const reference = new Map<string, number>(keys.map((k, i) => [k, i]));
let sink = 0;
const many = await compare(
  [
    {
      // The floor: one lookup in a V8 Map of 100 000 keys, nothing decided.
      name: 'reference: bare Map.get',
      run(n: number) {
        for (let j = 0; j < n; j++) sink += reference.get(keys[j % keys.length])!;
      },
    },
    {
      // The floor (#24): a lookup and a clock read, what any limiter must do per decision.
      name: 'reference: bare Map.get + performance.now()',
      run(n: number) {
        for (let j = 0; j < n; j++) sink += reference.get(keys[j % keys.length])! + performance.now();
      },
    },
    floodgate('floodgate fixedWindow (partitioned)', fw(), true),
    floodgate('floodgate slidingWindow (partitioned)', sw(), true),
    floodgate('floodgate tokenBucket (partitioned)', tb(), true),
    ...peers(true),
  ],
  N,
);
print('100 000 random keys: one decision (ns/op)', many, 'express-rate-limit MemoryStore.increment');
if (sink < 0) console.log(sink);

const pool = concurrency({ permitLimit: 64 });
const queued = concurrency({ permitLimit: 64, queueLimit: 1000 });
const limit = pLimit(64);
const noop = () => undefined;
const conc = await compare(
  [
    {
      name: 'floodgate concurrency tryAcquire+release',
      run: (n) => void loop(n, () => pool.tryAcquire().release()),
    },
    {
      name: 'floodgate concurrency await acquire+release',
      async run(n) {
        for (let j = 0; j < n; j++) (await queued.acquire()).release();
      },
    },
    {
      name: 'p-limit await limit(fn)',
      async run(n) {
        for (let j = 0; j < n; j++) await limit(noop);
      },
    },
  ],
  N,
);
print('Concurrency: take and give back one permit (ns/op)', conc, 'p-limit await limit(fn)');

function loop(n: number, fn: () => unknown): void {
  for (let j = 0; j < n; j++) fn();
}

// Heap per partition: each contender in its own process, 1 000 000 keys of 36 characters.
console.log('\nMemory per partition at 1 000 000 keys of 36 characters (heap + array buffers, after GC)');
for (const who of [
  'map',
  'floodgate-fixed',
  'floodgate-token',
  'floodgate-sliding',
  'express-rate-limit',
  'rate-limiter-flexible',
]) {
  const out = execFileSync(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', new URL('./memory.ts', import.meta.url).pathname, who],
    {
      encoding: 'utf8',
    },
  );
  console.log(`  ${out.trim()}`);
}
