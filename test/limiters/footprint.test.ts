/**
 * The engine's size, bounded without a timed test (issue #24): heap bytes per partition and bytes allocated per
 * granted decision, each measured after full collections in a child process (test/support/footprint-child.ts).
 * Both are deterministic to a few bytes; a change that grows either past its bound must say why, or win it back.
 * Instructions per decision are compared with a fixed reference by `npm run bench:instructions` (not a test:
 * it takes minutes under callgrind).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

const child = new URL('../support/footprint-child.ts', import.meta.url).pathname;

function measure(what: string): number {
  const out = execFileSync(
    process.execPath,
    // New space large enough that 100 000 decisions fit without a collection (the child checks it).
    ['--expose-gc', '--min-semi-space-size=64', '--max-semi-space-size=64', '--import', 'tsx', child, what],
    { encoding: 'utf8' },
  );
  return Number(JSON.parse(out));
}

test('heap per partition at 100 000 keys is within 1.3× a bare Map of the same keys', () => {
  const map = measure('map');
  const partitions = measure('partitions');
  // 6 December 2026, Node 20: 93 B a key in the Map, 115 B a partition (1.23×); 150 B before the engine was
  // put back on a diet (a slot-to-key column and a 32-byte slice object per stored key).
  assert.ok(
    partitions <= 1.3 * map,
    `${partitions.toFixed(1)} B a partition against ${map.toFixed(1)} B a key in a Map (${(partitions / map).toFixed(2)}×)`,
  );
});

test('a granted hot-key decision allocates at most 184 bytes (23 words)', () => {
  // 6 December 2026, Node 20: 177–194 B from run to run (the refundable lease, 13 fields, and the doubles it holds: its window's
  // start, the clock reading passed to the grant).
  const allocated = measure('allocated');
  assert.ok(allocated <= 184, `${allocated.toFixed(1)} B allocated a decision`);
});

test('a rejected hot-key decision allocates at most 144 bytes (18 words)', () => {
  // Abusive traffic is mostly rejections: they must stay cheaper than grants. 6 December 2026, Node 20: 136–147 B
  // from run to run (the lease, 8 fields, and the doubles it holds).
  const allocated = measure('rejected');
  assert.ok(allocated <= 144, `${allocated.toFixed(1)} B allocated a rejected decision`);
});
