/**
 * `npm run bench:instructions`: CPU instructions per in-process decision, the working tree's `src` beside a fixed
 * reference commit's, counted under `valgrind --tool=callgrind`. The count does not move with the load of the
 * machine (wall time on the 2-core VM moves ±20 % between identical runs), so it can resolve a few per cent.
 *
 * How: one decision script (`decisions.ts` below) is bundled by esbuild twice, once against `src` of the working
 * tree and once against `src` of {@link REFERENCE} (extracted with `git archive`). Each bundle runs under callgrind
 * with `node --single-threaded` (V8 compiles and collects on the main thread, so both are counted every time;
 * without it background compilation moves one build's count ±20 %) and `--hash-seed=1` (a random seed makes
 * start-up cost a different count each run) for LONG and SHORT decisions of one scenario;
 * the difference divided by LONG − SHORT is the cost of one decision at steady state, with start-up, module
 * loading, set-up and the first optimising compilations cancelled out.
 *
 * Run it before merging a change to `src/limiters`, `src/algorithms` or the HTTP hot path, and put the ratio in
 * the commit message. When a change beats the reference on every scenario, make that commit the new reference.
 *
 *   npm run bench:instructions
 *   REF=<commit> (compare with another commit)   ONLY=hot,chain (scenarios)   LONG=600000 SHORT=100000
 *   PARALLEL=2 (valgrind children at once; counts do not depend on load)   KEEP=1 (keep the temp dir)
 *   KEEP_NAMES=1 (both bundles with esbuild's keepNames, as tsx and name-keeping bundles compile: a class whose
 *   `name` is redefined and that the engine constructs on every decision shows here, ~5× the count)
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';

/**
 * The reference: the build of 6 December 2026 (88fd3d9), the first to beat the build of 30 November (a8de324,
 * issue #24) on every scenario — hot key 0.73×, one limiter 0.88×, random keys 0.80×, chain 0.57×, rejection
 * 0.78× (`REF=a8de324` compares with that one). Replace it with the commit that beats it on every scenario, and
 * say so in that commit's message.
 */
export const REFERENCE = '88fd3d9';

const LONG = Number(process.env.LONG ?? 600_000);
const SHORT = Number(process.env.SHORT ?? 100_000);
const PARALLEL = Number(process.env.PARALLEL ?? 2);

/** The scenarios: each name is a branch of the decision script. */
const SCENARIOS: Record<string, string> = {
  hot: 'hot key, partitioned fixedWindow tryAcquire',
  one: 'one limiter, fixedWindow tryAcquire',
  random: '100 000 random keys, partitioned fixedWindow',
  chain: 'chain(partitioned fixedWindow, fixedWindow), hot key',
  rejected: 'hot key rejected, partitioned fixedWindow',
  floor: 'the floor: clock, Map.get, window math, a lease',
};

/**
 * The decision script, written against the public API both builds share (`partitioned`, `fixedWindow`, `chain`,
 * `tryAcquire`, `lease.granted`). Set-up (limiters, keys, one pass that creates every partition) runs in both
 * counts and cancels; only the loop differs.
 */
const DECISIONS = `
import { chain, fixedWindow, partitioned } from 'SRC/index.ts';
// In a function of its own: top-level code would be compiled as part of the bundle's module function, whose size
// is the whole of floodgate's src — and differs between the two builds (the same hand-written loop counted 567
// instructions a decision at top level in one bundle and 488 in the other, 6 December 2026).
function main() {
const [scenario, count] = [process.argv[2], Number(process.argv[3])];
const HUGE = 1_000_000_000;
const fw = (permitLimit = HUGE) => fixedWindow({ permitLimit, window: '1h' });
const byKey = (limiter) => partitioned({ key: (k) => k, limiter, maxPartitions: 1_000_000 });
let granted = 0;
if (scenario === 'hot') {
  const limiter = byKey(fw());
  for (let i = 0; i < count; i++) if (limiter.tryAcquire('hot-key').granted) granted++;
} else if (scenario === 'one') {
  const limiter = fw();
  for (let i = 0; i < count; i++) if (limiter.tryAcquire().granted) granted++;
} else if (scenario === 'random') {
  const limiter = byKey(fw());
  // Deterministic keys of 36 characters (a UUID's length), the same in both builds and both counts.
  const keys = Array.from({ length: 100_000 }, (_, i) => 'k' + String(i * 7919 % 1_000_003).padStart(35, '0'));
  for (const key of keys) limiter.tryAcquire(key);
  let x = 12345;
  for (let i = 0; i < count; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    if (limiter.tryAcquire(keys[x % 100_000]).granted) granted++;
  }
} else if (scenario === 'chain') {
  const limiter = chain(byKey(fw()), fw());
  for (let i = 0; i < count; i++) if (limiter.tryAcquire('hot-key').granted) granted++;
} else if (scenario === 'floor') {
  // No floodgate: what any decision must do, written by hand — a clock read, a map lookup, a fixed window's
  // arithmetic and a lease of the same 13 fields (public, refund and settle state) that the caller does not keep
  // but the compiler cannot prove dead (it comes from a branch), as floodgate's does not. Both builds count it
  // alike: it is the floor the other rows are read against (docs/benchmarks.md).
  class L {
    constructor(g, r, ra, l, rem, reset, src, k, o, sl, p, m, gen) {
      this.granted = g; this.reason = r; this.retryAfterMs = ra; this.limit = l; this.remaining = rem;
      this.resetAfterMs = reset; this.source = src; this.key = k; this.owner = o; this.slot = sl; this.permits = p;
      this.mark = m; this.generation = gen;
    }
  }
  const perf = globalThis.performance;
  const map = new Map([['hot-key', 0]]);
  const states = new Float64Array(2);
  states[0] = perf.now();
  const src = {};
  const OTHER = { granted: false };
  const decide = (key) => {
    const now = perf.now();
    const o = map.get(key);
    if (now - states[o] >= 3_600_000) { states[o] = now; states[o + 1] = 0; }
    const count = states[o + 1];
    if (count >= HUGE) return new L(false, 'limit', 1, HUGE, 0, 1, src, key, undefined, o, 1, states[o], 0);
    states[o + 1] = count + 1;
    return new L(true, undefined, undefined, HUGE, HUGE - count - 1, Math.ceil(states[o] + 3_600_000 - now), src, key, src, o, 1, states[o], 0);
  };
  for (let i = 0; i < count; i++) {
    const lease = i === -1 ? OTHER : decide('hot-key');
    if (lease.granted) granted++;
  }
} else if (scenario === 'rejected') {
  const limiter = byKey(fw(1));
  for (let i = 0; i < count; i++) if (limiter.tryAcquire('hot-key').granted) granted++;
} else {
  throw new Error('unknown scenario ' + scenario);
}
if (granted < 0) console.log(granted);
}
main();
`;

const root = new URL('..', import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'floodgate-instructions-'));
const ref = process.env.REF ?? REFERENCE;
const refCommit = execFileSync('git', ['rev-parse', '--short', ref], { cwd: root, encoding: 'utf8' }).trim();

/** Bundles the decision script against one `src` directory into one ES module file. */
async function bundle(name: string, src: string): Promise<string> {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  const entry = join(dir, 'decisions.mjs');
  writeFileSync(entry, DECISIONS.replace('SRC', src));
  const out = join(dir, 'bundle.mjs');
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    outfile: out,
    logLevel: 'error',
    keepNames: process.env.KEEP_NAMES === '1',
  });
  return out;
}

/** Instructions of one whole run of a bundle under callgrind (every thread, start-up included). */
function instructions(file: string, scenario: string, count: number): Promise<number> {
  const out = join(work, `callgrind.${scenario}.${count}.${Math.random().toString(36).slice(2)}`);
  return new Promise((resolve, reject) => {
    const proc = spawn(
      'valgrind',
      [
        '--tool=callgrind',
        // V8 writes the code it runs: valgrind must notice code changing on the heap.
        '--smc-check=all-non-file',
        `--callgrind-out-file=${out}`,
        process.execPath,
        '--single-threaded',
        // A fixed hash seed: with a random one, V8's start-up (HashSeed::InitializeRoots) costs a different number
        // of instructions each run (±650 000 measured on `node -e 0`; 600 with the seed fixed), noise that the
        // LONG − SHORT subtraction does not cancel.
        '--hash-seed=1',
        file,
        scenario,
        String(count),
      ],
      { stdio: ['ignore', 'inherit', 'pipe'] },
    );
    let stderr = '';
    proc.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    proc.on('error', reject);
    proc.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${file} ${scenario} ${count}: exit ${code}\n${stderr}`));
      const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(out, 'utf8'));
      if (totals === null) return reject(new Error(`no totals in ${out}`));
      resolve(Number(totals[1]));
    });
  });
}

const refDir = join(work, 'reference');
mkdirSync(refDir);
execFileSync('sh', ['-c', `git archive ${refCommit} src tsconfig.json | tar -x -C ${refDir}`], { cwd: root });
const builds = {
  tree: await bundle('tree', join(root, 'src')),
  reference: await bundle('ref', join(refDir, 'src')),
};
const chosen = process.env.ONLY?.split(',') ?? Object.keys(SCENARIOS);
for (const s of chosen) if (!(s in SCENARIOS)) throw new Error(`unknown scenario ${s}`);

const jobs: Array<{ scenario: string; which: 'tree' | 'reference'; count: number; result?: number }> = [];
for (const scenario of chosen) {
  for (const which of ['tree', 'reference'] as const) {
    for (const count of [LONG, SHORT]) jobs.push({ scenario, which, count });
  }
}
const queue = [...jobs];
await Promise.all(
  Array.from({ length: PARALLEL }, async () => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
      job.result = await instructions(builds[job.which], job.scenario, job.count);
    }
  }),
);
const perDecision = (scenario: string, which: 'tree' | 'reference'): number => {
  const of = (count: number) =>
    jobs.find((j) => j.scenario === scenario && j.which === which && j.count === count)!;
  return (of(LONG).result! - of(SHORT).result!) / (LONG - SHORT);
};

console.log(
  `\nInstructions per decision (callgrind, node --single-threaded ${process.version}, ` +
    `(${LONG} − ${SHORT} decisions) subtracted): working tree vs ${refCommit}`,
);
console.log(`${'scenario'.padEnd(56)}${'tree'.padStart(9)}${refCommit.padStart(9)}${'ratio'.padStart(8)}`);
for (const scenario of chosen) {
  const tree = perDecision(scenario, 'tree');
  const reference = perDecision(scenario, 'reference');
  console.log(
    `${SCENARIOS[scenario].padEnd(56)}${tree.toFixed(0).padStart(9)}${reference.toFixed(0).padStart(9)}` +
      `${(tree / reference).toFixed(2).padStart(7)}×`,
  );
}
if (process.env.KEEP === '1') console.log(`kept ${work}`);
else rmSync(work, { recursive: true, force: true });
