/**
 * The limiter core of this checkout against another one (say main), in one process, alternating, medians of
 * the process's CPU time per operation (wall time on a shared VM moves ±20 %): the decision paths `npm run
 * bench` measures plus the queue's (waiters pushed, served and aborted, one class).
 *
 *   git archive main | tar -x -C /tmp/base && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   BASE=/tmp/base node --import tsx bench/core-vs-base.bench.ts
 */
import type { Contender } from './harness.ts';

const base = process.env.BASE;
if (base === undefined) throw new Error('set BASE to the root of the checkout to compare with');
type Floodgate = typeof import('../src/index.ts');
const here: Floodgate = await import('../src/index.ts');
const there: Floodgate = await import(`${base}/src/index.ts`);

const N = 200_000;
const HUGE = 1_000_000_000;

function contenders(f: Floodgate, tag: string): Contender[] {
  const fw = f.fixedWindow({ permitLimit: HUGE, window: '1m' });
  const byKey = f.partitioned({
    key: (k: string) => k,
    limiter: f.fixedWindow({ permitLimit: HUGE, window: '1m' }),
  });
  const bucket = f.partitioned({
    key: (k: string) => k,
    limiter: f.tokenBucket({ tokenLimit: HUGE, tokensPerPeriod: HUGE, period: '1s' }),
  });
  const pool = f.concurrency({ permitLimit: 64 });
  const queued = f.concurrency({ permitLimit: 64, queueLimit: 1000 });
  const one = f.concurrency({ permitLimit: 1, queueLimit: 1_000_000 });
  const lifo = f.concurrency({ permitLimit: 1, queueLimit: 1_000_000, queueOrder: 'newest-first' });
  const waiters = async (limiter: typeof one, n: number, abortEvery: number) => {
    const held = limiter.tryAcquire();
    const controllers: AbortController[] = [];
    const pending: Promise<unknown>[] = [];
    for (let j = 0; j < n; j++) {
      const controller = new AbortController();
      controllers.push(controller);
      pending.push(limiter.acquire(1, { signal: controller.signal }).then((l) => l.release(), noop));
    }
    for (let j = 0; j < n; j += abortEvery) controllers[j].abort();
    held.release();
    await Promise.all(pending);
  };
  return [
    { name: `${tag} fixedWindow hot key (partitioned)`, run: (n) => loop(n, () => byKey.tryAcquire('hot')) },
    { name: `${tag} tokenBucket hot key (partitioned)`, run: (n) => loop(n, () => bucket.tryAcquire('hot')) },
    { name: `${tag} fixedWindow one limiter`, run: (n) => loop(n, () => fw.tryAcquire()) },
    { name: `${tag} concurrency tryAcquire+release`, run: (n) => loop(n, () => pool.tryAcquire().release()) },
    {
      name: `${tag} concurrency await acquire+release`,
      async run(n) {
        for (let j = 0; j < n; j++) (await queued.acquire()).release();
      },
    },
    {
      name: `${tag} queue: 1000 waiters served FIFO, 1 in 10 aborted`,
      run: (n) => batches(n, (k) => waiters(one, k, 10)),
    },
    {
      name: `${tag} queue: 1000 waiters served LIFO, 1 in 10 aborted`,
      run: (n) => batches(n, (k) => waiters(lifo, k, 10)),
    },
  ];
}

function loop(n: number, fn: () => unknown): void {
  for (let j = 0; j < n; j++) fn();
}

async function batches(n: number, run: (k: number) => Promise<void>): Promise<void> {
  for (let done = 0; done < n; done += 1000) await run(1000);
}

function noop(): void {}

const mine = contenders(here, 'this');
const theirs = contenders(there, 'base');
const all: Contender[] = [];
for (let i = 0; i < mine.length; i++) all.push(mine[i], theirs[i]);
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const results = await compareCpu(all, N, ROUNDS);
console.log(
  `\nThis checkout against ${base} (CPU ns/op, median of ${ROUNDS} alternating rounds; ratio > 1: this is slower)`,
);
for (let i = 0; i < results.length; i += 2) {
  const a = results[i];
  const b = results[i + 1];
  const name = a.name.slice('this '.length);
  console.log(
    `  ${name.padEnd(52)} ${a.nsPerOp.toFixed(1).padStart(8)}  vs ${b.nsPerOp.toFixed(1).padStart(8)}   ${(a.nsPerOp / b.nsPerOp).toFixed(3)}×`,
  );
}

/** Like the harness's `compare`, but timed by `process.cpuUsage()`: what the process spent, not what the VM gave. */
async function compareCpu(list: Contender[], n: number, rounds: number) {
  const samples = list.map(() => [] as number[]);
  for (const c of list) await c.run(Math.min(n, 20_000)); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < list.length; k++) {
      // Rotate, so no contender always runs first after GC; pairs stay side by side, in turns first.
      const pair = (k + 2 * round) % list.length;
      const i = round % 2 === 0 ? pair : pair ^ 1;
      const start = process.cpuUsage();
      await list[i].run(n);
      const used = process.cpuUsage(start);
      samples[i].push(((used.user + used.system) * 1000) / n);
    }
  }
  return list.map((c, i) => ({ name: c.name, nsPerOp: median(samples[i]) }));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
