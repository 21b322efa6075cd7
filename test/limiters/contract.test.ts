/**
 * The HTTP layer asks limiters only through their contract (`src/limiters/limiter.ts`): no file under src/http
 * tells floodgate's limiter or lease classes apart with `instanceof`, or builds or edits a lease. A new kind
 * of limiter (test/limiters/sample-limiter.ts) works there without a change.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as algorithms from '../../src/algorithms/index.ts';
import * as core from '../../src/index.ts';
import * as redis from '../../src/redis/index.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f));
}

// Every class floodgate's limiter entry points export (limiters, chains, leases), whatever it is named.
const classes = [...Object.entries(core), ...Object.entries(redis), ...Object.entries(algorithms)]
  .filter(
    ([, value]) => typeof value === 'function' && /^class\b/.test(Function.prototype.toString.call(value)),
  )
  .map(([name]) => name);

test('the list of limiter classes is not empty (the check below can fail)', () => {
  for (const name of [
    'RateLimiter',
    'PartitionedLimiter',
    'ChainLimiter',
    'ChainLease',
    'Lease',
    'FixedWindow',
  ])
    assert.ok(classes.includes(name), name);
});

test('no file under src/http uses instanceof on a limiter or lease class, or news or edits a lease', () => {
  const offenders: string[] = [];
  for (const file of sources('src/http')) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const [, name] of text.matchAll(/\binstanceof\s+([A-Za-z_$][\w$]*)/g)) {
      if (classes.includes(name)) offenders.push(`${file}: instanceof ${name}`);
    }
    for (const [match] of text.matchAll(/\bnew\s+(?:Chain|Held|Refundable)?Lease\b|\blease\.key\s*=[^=]/g)) {
      offenders.push(`${file}: ${match}`);
    }
  }
  assert.deepEqual(offenders, []);
});

test('no file under src/limiters, src/redis or src/fetch assigns a lease field after construction', () => {
  const offenders = ['src/limiters', 'src/redis', 'src/fetch'].flatMap((dir) =>
    sources(dir).flatMap((file) =>
      [...readFileSync(join(root, file), 'utf8').matchAll(/\b\w*[lL]eases?(?:\[\w+\])?\.key\s*=[^=]/g)].map(
        ([match]) => `${file}: ${match}`,
      ),
    ),
  );
  assert.deepEqual(offenders, []);
});

test('a lease is immutable: its fields are read-only and it is made by named factories', () => {
  const lease = core.Lease.rejected('unavailable', { limit: 5, remaining: 0, retryAfterMs: 100, key: 'k' });
  assert.deepEqual(
    [
      lease.granted,
      lease.reason,
      lease.retryAfterMs,
      lease.limit,
      lease.remaining,
      lease.key,
      lease.metadata,
    ],
    [false, 'unavailable', 100, 5, 0, 'k', {}],
  );
  // Read-only to the compiler (the typecheck fails if a field can be assigned); nothing in src assigns one.
  const edit = (l: core.Lease) => {
    // @ts-expect-error a lease's key is read-only
    l.key = 'other';
    // @ts-expect-error a lease's remaining is read-only
    l.remaining = 1;
  };
  assert.equal(typeof edit, 'function');
  const granted = core.Lease.granted({ limit: 5, remaining: 4, metadata: { fallback: true } });
  assert.equal(granted.granted, true);
  assert.equal(granted.metadata.fallback, true);
  assert.equal(granted.holdsPermits, false);
  assert.equal(granted.members, undefined);
});

test('the Redis protocol encodes an algorithm by what it says of itself, not by its class', () => {
  const file = 'src/redis/protocol.ts';
  const text = readFileSync(join(root, file), 'utf8');
  const offenders = [...text.matchAll(/\binstanceof\s+([A-Za-z_$][\w$]*)/g)]
    .filter(([, name]) => classes.includes(name))
    .map(([match]) => `${file}: ${match}`);
  assert.deepEqual(offenders, []);
});

test('a Redis decision is built from named fields (Decision.of), never from a positional list outside its file', () => {
  const offenders = sources('src/redis')
    .filter((file) => !file.endsWith('decision.ts'))
    .flatMap((file) =>
      [...readFileSync(join(root, file), 'utf8').matchAll(/\bnew\s+Decision\s*\(/g)].map(
        ([match]) => `${file}: ${match}`,
      ),
    );
  assert.deepEqual(offenders, []);
  // Its constructor is private, so the compiler refuses a positional call anywhere else too.
  assert.match(readFileSync(join(root, 'src/redis/decision.ts'), 'utf8'), /\bprivate constructor\(/);
});
