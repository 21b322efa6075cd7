/**
 * `leases: 'auto'` on a real redis-server, on a hand-moved clock (issue 26 §3): a cold key is decided exactly,
 * one try (op `t`) per decision; a key this process decides often moves to leases (takes, op `l`, a few for
 * many decisions); once it cools it comes back to exact decisions, its batch given back (op `g`) so Redis
 * counts exactly what was granted. The ops are those the engine encodes; their cost is Redis's own count
 * (`INFO commandstats`).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { fixedWindow, slidingWindow, tokenBucket } from '../../src/index.ts';
import type { Engine } from '../../src/redis/engine.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { DEMOTE_AFTER_MS, INTERVAL_MS, PROMOTE_COUNT } from '../../src/redis/lease-policy.ts';
import { RedisServer } from '../support/redis-server.ts';
import { type TestClock, testClock, uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let clock: TestClock;
let store: RedisStore;
let engine: Engine;
/** The op of every request the engine encoded, with its key. */
const ops: { op: string; key: string }[] = [];
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  clock = testClock(0);
  store = redisStore({ client, clock, timeoutMs: 5000 });
  engine = (store as unknown as { context: { engine: Engine } }).context.engine;
  const encode = engine.encodeArgs.bind(engine);
  engine.encodeArgs = (args, binding, op, ...rest) => {
    ops.push({ op, key: binding.members[0].partKey ?? '' });
    encode(args, binding, op, ...rest);
  };
});
after(async () => {
  client.disconnect();
  await server.stop();
});

/** Commands Redis ran so far, those run inside scripts and Functions included. */
async function commands(): Promise<number> {
  const info = String(await client.info('commandstats'));
  let total = 0;
  for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) if (m[1] !== 'info') total += Number(m[2]);
  return total;
}

const opsOf = (key: string, from: number) =>
  ops
    .slice(from)
    .filter((o) => o.key === key)
    .map((o) => o.op);

for (const kind of ['fixed', 'sliding'] as const) {
  test(`${kind} window, leases: 'auto': a cold key stays exact, a hot one is leased, and back to exact when it cools`, async () => {
    clock.advance(3_600_000); // forward only: the policy's intervals are on this clock
    const limit = 100_000;
    const perKey = store.partitioned({
      name: uniqueName(),
      key: (k: string) => k,
      limiter:
        kind === 'fixed'
          ? fixedWindow({ permitLimit: limit, window: '1h' })
          : slidingWindow({ permitLimit: limit, window: '1h', segmentsPerWindow: 4 }),
      leases: 'auto',
    });
    // Below the promotion rate (10 in an interval, against 20): exact, one try each, remaining to the permit.
    let start = ops.length;
    for (let i = 1; i <= 50; i++) {
      clock.advance(INTERVAL_MS / (PROMOTE_COUNT / 2));
      const lease = await perKey.tryAcquire('hot');
      assert.equal(lease.remaining, limit - i);
      assert.equal((await perKey.tryAcquire('cold')).remaining, limit - i);
    }
    assert.deepEqual(new Set(opsOf('hot', start)), new Set(['t']));
    assert.equal(opsOf('hot', start).length, 50);

    // Hot: a decision a millisecond, 100 an interval. Leased from the PROMOTE_COUNT-th decision of an interval on.
    start = ops.length;
    const before = await commands();
    for (let i = 0; i < 2000; i++) {
      clock.advance(1);
      assert.equal((await perKey.tryAcquire('hot')).granted, true);
      if (i % 20 === 0) assert.equal((await perKey.tryAcquire('cold')).granted, true);
    }
    const spent = (await commands()) - before;
    const hot = opsOf('hot', start);
    // Promoted within two intervals (the first may have begun before the key got hot).
    const exact = hot.indexOf('l');
    assert.ok(exact > 0 && exact < 2 * PROMOTE_COUNT, `${hot.length} ops: ${hot.join('')}`);
    assert.ok(!hot.slice(exact).includes('t'), `leased from then on: ${hot.join('')}`);
    // Batches of about 50 ms of demand (50 permits here): ~40 takes.
    assert.ok(hot.length < 100, `${hot.length} requests for 2000 decisions: ${hot.join('')}`);
    // The cold key, 100 decisions at 5 an interval: one try each, still.
    assert.deepEqual(opsOf('cold', start), Array(100).fill('t'));
    // Redis's own count: the cold key's 2–3 commands each, the hot key's few.
    assert.ok(spent < 100 * 3 + 150, `${spent} commands for 2100 decisions`);

    // Cooling: a decision every 100 ms (10 a second, under a quarter of the promotion rate).
    start = ops.length;
    let demotedAfter: number | undefined;
    for (let t = 0; t <= DEMOTE_AFTER_MS + 5 * INTERVAL_MS; t += 100) {
      clock.advance(100);
      const n = opsOf('hot', start).length;
      await perKey.tryAcquire('hot');
      if (demotedAfter === undefined && opsOf('hot', start).slice(n).includes('t')) demotedAfter = t;
    }
    assert.ok(
      demotedAfter !== undefined && demotedAfter <= DEMOTE_AFTER_MS + 2 * INTERVAL_MS,
      `exact again after ${demotedAfter} ms`,
    );
    // Exact again: what the batch held is back in Redis, and a decision's remaining is Redis's count to the permit.
    const granted = perKey.granted;
    const lease = await perKey.tryAcquire('hot');
    assert.equal(
      lease.remaining,
      limit - (granted + 1 - 150),
      'hot: every grant counted once, no permit held (150 grants were the cold key)',
    );
    const tail = opsOf('hot', start);
    assert.equal(tail.at(-1), 't');
    assert.ok(!tail.slice(tail.indexOf('t')).includes('l'), `no take once exact: ${tail.join('')}`);
  });
}

test("leases: 'auto' with tiers, and its validation", async () => {
  assert.throws(
    () =>
      store.limiter(fixedWindow({ permitLimit: 5, window: 1000 }), { name: 'x', leases: 'always' as never }),
    /store\.limiter: leases must be true, false or 'auto'; got "always"/,
  );
  const tiers = store.partitioned({
    name: uniqueName(),
    key: (k: string) => k,
    limiter: () => fixedWindow({ permitLimit: 5, window: 1000, countRejected: true }),
    leases: 'auto',
  });
  await assert.rejects(tiers.tryAcquire('a'), /countRejected must be false/);
});

test("token bucket, leases: 'auto': a hot key is leased, a cooled one exact again with no token held, and the bucket never over-admits", async () => {
  clock.advance(3_600_000);
  // A bucket's takes and give-backs are encoded apart (with its holders' key): recorded as the others' ops.
  const leases = (engine as unknown as { leases: { bucketArgs: (...a: unknown[]) => void } }).leases;
  const bucketArgs = leases.bucketArgs.bind(leases);
  leases.bucketArgs = (args, entry, ...rest) => {
    const e = entry as { binding: { members: { partKey?: string }[] } };
    ops.push({ op: rest[1] as string, key: e.binding.members[0].partKey ?? '' });
    bucketArgs(args, entry, ...rest);
  };
  const tokenLimit = 1000;
  // One token an hour: no refill within the test, so the bucket admits tokenLimit in all.
  const perKey = store.partitioned({
    name: uniqueName(),
    key: (k: string) => k,
    limiter: tokenBucket({ tokenLimit, tokensPerPeriod: 1, period: '1h' }),
    leases: 'auto',
  });
  let granted = 0;
  const decide = async () => {
    const lease = await perKey.tryAcquire('hot');
    if (lease.granted) granted++;
    return lease;
  };
  // Cold: exact, one try each, remaining to the token.
  let start = ops.length;
  for (let i = 1; i <= 30; i++) {
    clock.advance(INTERVAL_MS / (PROMOTE_COUNT / 2));
    assert.equal((await decide()).remaining, tokenLimit - i);
  }
  assert.deepEqual(opsOf('hot', start), Array(30).fill('t'));

  // Hot: a decision a millisecond. Leased within two intervals, and from then on.
  start = ops.length;
  for (let i = 0; i < 400; i++) {
    clock.advance(1);
    assert.equal((await decide()).granted, true);
  }
  const hot = opsOf('hot', start);
  const leased = hot.indexOf('l');
  assert.ok(leased > 0 && leased < 2 * PROMOTE_COUNT, `${hot.length} ops: ${hot.join('')}`);
  assert.ok(!hot.slice(leased).includes('t'), `leased from then on: ${hot.join('')}`);
  // Batches of the request plus at most 1 % of tokenLimit: fewer takes than decisions.
  assert.ok(hot.length < 400 / 2, `${hot.length} requests for 400 decisions: ${hot.join('')}`);

  // Cooling: 10 a second. Exact again, and what the batch held is back in the bucket.
  start = ops.length;
  let demotedAfter: number | undefined;
  for (let t = 0; t <= DEMOTE_AFTER_MS + 5 * INTERVAL_MS; t += 100) {
    clock.advance(100);
    const n = opsOf('hot', start).length;
    await decide();
    if (demotedAfter === undefined && opsOf('hot', start).slice(n).includes('t')) demotedAfter = t;
  }
  assert.ok(
    demotedAfter !== undefined && demotedAfter <= DEMOTE_AFTER_MS + 2 * INTERVAL_MS,
    `exact again after ${demotedAfter} ms`,
  );
  assert.equal((await decide()).remaining, tokenLimit - granted, 'every grant counted once, no token held');
  assert.equal(opsOf('hot', start).at(-1), 't');

  // Hot again until the bucket is empty: it admits its tokens and no more.
  for (let i = 0; i < 1500; i++) {
    clock.advance(1);
    await decide();
  }
  assert.ok(granted <= tokenLimit, `${granted} granted of ${tokenLimit}`);
  assert.ok(
    granted >= tokenLimit - Math.floor(tokenLimit / 100),
    `${granted} granted: none stranded beyond the reserve`,
  );
});
