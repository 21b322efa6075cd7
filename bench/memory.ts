/** Heap bytes per partition for one contender (run by limiters.bench.ts in a child process). */
import { randomBytes } from 'node:crypto';
import { MemoryStore } from 'express-rate-limit';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type * as Floodgate from '../src/index.ts';

// The build users install (see limiters.bench.ts), typed by src (a fresh clone has no dist/ to typecheck against).
const dist = new URL('../dist/index.js', import.meta.url).href;
const { fixedWindow, partitioned, slidingWindow, tokenBucket } = (await import(dist)) as typeof Floodgate;

const KEYS = 1_000_000;
const who = process.argv[2];
const gc = (globalThis as { gc?: () => void }).gc!;

function used(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

const make: Record<string, () => (key: string) => unknown> = {
  map: () => {
    const map = new Map<string, number>();
    return (k) => map.set(k, 1);
  },
  'floodgate-fixed': () => {
    const l = partitioned({
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: 10, window: '1h' }),
      maxPartitions: KEYS,
    });
    return (k) => l.tryAcquire(k);
  },
  'floodgate-token': () => {
    const l = partitioned({
      key: (k: string) => k,
      limiter: tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: '1h' }),
      maxPartitions: KEYS,
    });
    return (k) => l.tryAcquire(k);
  },
  'floodgate-sliding': () => {
    const l = partitioned({
      key: (k: string) => k,
      limiter: slidingWindow({ permitLimit: 10, window: '1h', segmentsPerWindow: 4 }),
      maxPartitions: KEYS,
    });
    return (k) => l.tryAcquire(k);
  },
  'express-rate-limit': () => {
    const store = new MemoryStore();
    store.init({ windowMs: 3_600_000 } as never);
    return (k) => store.increment(k);
  },
  'rate-limiter-flexible': () => {
    const rl = new RateLimiterMemory({ points: 10, duration: 3600 });
    return (k) => rl.consume(k).catch(() => undefined);
  },
};

const hit = make[who]();
const keep: unknown[] = [hit];
const before = used();
for (let i = 0; i < KEYS; i++) {
  const p = hit(randomBytes(18).toString('hex')); // 36 characters, a flat string
  if (i % 10_000 === 0 && p instanceof Promise) await p;
}
await new Promise((r) => setImmediate(r));
const after = used();
console.log(`${who.padEnd(24)} ${((after - before) / KEYS).toFixed(0).padStart(5)} B/partition`);
keep.length = 0;
process.exit(0);
