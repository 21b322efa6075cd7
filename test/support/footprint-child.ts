/**
 * Child process of test/limiters/footprint.test.ts (needs --expose-gc): prints one number, what the engine
 * costs in memory, measured after full collections, so the parent can bound it without timing anything.
 *
 *   map:        heap bytes per key of a bare Map<string, number> at 100 000 flat keys of 36 characters (the floor);
 *   partitions: the same for a partitioned fixed window (keys included, as in the map);
 *   allocated:  bytes allocated per granted hot-key decision, over 100 000 decisions after as many to warm up,
 *               with new space large enough that no collection falls inside (checked: the heap only grew);
 *   rejected:   the same for a rejected hot-key decision (a limit of 1, taken by the first).
 */
import { fixedWindow, partitioned } from '../../src/index.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const KEYS = 100_000;
const DECISIONS = 100_000;

function used(): number {
  gc!();
  gc!();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** Deterministic 36-character flat keys, made one by one (each is part of what is kept). */
function key(i: number): string {
  return Buffer.from(`k${String(i * 7919).padStart(35, '0')}`, 'latin1').toString('latin1');
}

/** What is measured is kept here until measured (a local the compiler sees as dead may be collected early). */
const kept: unknown[] = [];

function perPartition(make: () => (key: string) => unknown): number {
  const hit = make();
  kept.push(hit);
  const before = used();
  for (let i = 0; i < KEYS; i++) hit(key(i));
  const after = used();
  kept.length = 0;
  return (after - before) / KEYS;
}

function allocatedPerDecision(permitLimit: number): number {
  const limiter = partitioned({
    key: (k: string) => k,
    limiter: fixedWindow({ permitLimit, window: '1h' }),
  });
  let granted = 0;
  const run = () => {
    for (let i = 0; i < DECISIONS; i++) if (limiter.tryAcquire('hot-key').granted) granted++;
  };
  run(); // warm: the optimising compiler has run
  for (let attempt = 0; attempt < 5; attempt++) {
    gc!();
    const before = process.memoryUsage().heapUsed;
    run();
    const after = process.memoryUsage().heapUsed;
    if (after > before) return (after - before) / DECISIONS;
  }
  throw new Error(`a collection fell inside every measure (${granted} granted)`);
}

const what = process.argv[2];
if (what === 'map') {
  console.log(
    JSON.stringify(
      perPartition(() => {
        const m = new Map<string, number>();
        return (k) => m.set(k, 1);
      }),
    ),
  );
} else if (what === 'partitions') {
  console.log(
    JSON.stringify(
      perPartition(() => {
        const limiter = partitioned({
          key: (k: string) => k,
          limiter: fixedWindow({ permitLimit: 10, window: '1h' }),
          maxPartitions: KEYS,
        });
        return (k) => limiter.tryAcquire(k);
      }),
    ),
  );
} else if (what === 'allocated') {
  console.log(JSON.stringify(allocatedPerDecision(1_000_000_000)));
} else if (what === 'rejected') {
  console.log(JSON.stringify(allocatedPerDecision(1)));
} else throw new Error(`what? ${what}`);
