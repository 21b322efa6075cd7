/**
 * Leased decisions (`leases: true`, issue 26) on a real redis-server, one process, on a hand-moved clock: the
 * Lua take and give-back answer what the reference model answers; a leased limiter decides from its batch with no
 * command, rejects locally until the retry time, and its windows (segments) admit exactly the limit across two
 * stores; refunds, `onUnavailable` and the option's validation.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import type { Algorithm } from '../../src/algorithms/algorithm.ts';
import { fixedWindow, lockout, slidingWindow, tokenBucket } from '../../src/index.ts';
import type { LimiterSpec } from '../../src/limiters/rate-limiter.ts';
import type { Binding } from '../../src/redis/binding.ts';
import type { Engine } from '../../src/redis/engine.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { LeaseModelStore, type TakeReply } from './lease-model.ts';
import { type TestClock, testClock, uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let clock: TestClock;
let store: RedisStore;
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  clock = testClock(0);
  store = redisStore({ client, clock, timeoutMs: 5000 });
});
after(async () => {
  client.disconnect();
  await server.stop();
});

/** Script calls Redis ran so far (FCALL, EVALSHA, EVAL): what a decision costs the store. */
async function calls(): Promise<number> {
  const info = String(await client.info('commandstats'));
  let total = 0;
  for (const m of info.matchAll(/cmdstat_(?:fcall|evalsha|eval):calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

const engineOf = (s: RedisStore) => (s as unknown as { context: { engine: Engine } }).context.engine;

/** The Lua ops, sent as the engine sends them. */
async function luaTake(
  key: string,
  spec: LimiterSpec,
  now: number,
  want: number,
  need: number,
): Promise<TakeReply> {
  const engine = engineOf(store);
  const binding: Binding = {
    members: [
      {
        key,
        spec,
        origin: '',
        owner: { name: 'x', granted: 0, rejected: 0 },
        partKey: undefined,
        leased: true,
      },
    ],
    partKey: undefined,
    chain: false,
  };
  const args: string[] = [];
  engine.encodeArgs(args, binding, 'l', want, String(need), false, String(now));
  const f = (await engine.dispatcher.request([key], args)).split(',');
  if (f[0] === '1') {
    return {
      granted: true,
      permits: Number(f[1]),
      remaining: Number(f[2]),
      resetMs: Number(f[3]),
      mark: f[4],
      endMs: Number(f[5]),
    };
  }
  return { granted: false, retryMs: Number(f[2]) };
}

async function luaGive(key: string, spec: LimiterSpec, now: number, n: number, mark: string): Promise<void> {
  const engine = engineOf(store);
  const binding: Binding = {
    members: [
      {
        key,
        spec,
        origin: '',
        owner: { name: 'x', granted: 0, rejected: 0 },
        partKey: undefined,
        leased: true,
      },
    ],
    partKey: undefined,
    chain: false,
  };
  const args: string[] = [];
  engine.encodeArgs(args, binding, 'g', n, mark, false, String(now));
  await engine.dispatcher.request([key], args);
}

/** A limiter kind that cannot lease. */
const LOGIN = () => lockout({ failures: 3, within: 60_000, lockFor: 60_000 });

const specs: [string, () => LimiterSpec][] = [
  ['fixed window', () => fixedWindow({ permitLimit: 10, window: 100 })],
  ['sliding window', () => slidingWindow({ permitLimit: 12, window: 120, segmentsPerWindow: 4 })],
];

for (const [name, make] of specs) {
  test(`${name}: the Lua take and give-back answer what the reference model answers, op for op`, async () => {
    type Op =
      | { op: 'take'; dt: number; want: number; need: number }
      | { op: 'give'; dt: number; n: number; back: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({
        op: fc.constant('take' as const),
        dt: fc.integer({ min: 0, max: 70 }),
        want: fc.integer({ min: 1, max: 15 }),
        need: fc.integer({ min: 1, max: 4 }),
      }),
      fc.record({
        op: fc.constant('give' as const),
        dt: fc.integer({ min: 0, max: 70 }),
        n: fc.integer({ min: 1, max: 6 }),
        back: fc.integer({ min: 0, max: 5 }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 40 }), async (ops) => {
        const spec = make();
        const model = new LeaseModelStore(spec.algorithm as Algorithm);
        const key = `floodgate:{${uniqueName()}}`;
        let now = 1_000;
        const marks: string[] = [];
        for (const o of ops) {
          now += o.dt;
          if (o.op === 'take') {
            const expected = model.take(now, Math.max(o.want, o.need), o.need);
            const actual = await luaTake(key, spec, now, Math.max(o.want, o.need), o.need);
            assert.deepEqual(actual, expected, `take at ${now}`);
            if (expected.granted) marks.push(expected.mark);
          } else {
            const mark = marks[marks.length - 1 - o.back] ?? String(now);
            model.giveBack(now, o.n, mark);
            await luaGive(key, spec, now, o.n, mark);
          }
        }
      }),
      { numRuns: 60 },
    );
  });
}

test('a leased limiter decides from its batch with no command, then rejects locally until the retry time', async () => {
  clock.set(0);
  const limiter = store.limiter(fixedWindow({ permitLimit: 100, window: 1000 }), {
    name: uniqueName(),
    leases: true,
  });
  // Demand ramps the batch up: 1, 2, 4, … permits per take, each take one command.
  const before = await calls();
  let granted = 0;
  for (let i = 0; i < 100; i++) {
    clock.advance(1);
    if ((await limiter.tryAcquire()).granted) granted++;
  }
  const spent = (await calls()) - before;
  assert.equal(granted, 100, 'the whole limit, on this one process');
  assert.ok(spent <= 10, `${spent} script calls for 100 decisions`);
  // Spent: Redis says so once, then the key is rejected here until the window's end.
  const first = await limiter.tryAcquire();
  assert.equal(first.granted, false);
  assert.equal(first.retryAfterMs, 900);
  const afterReject = await calls();
  clock.advance(500);
  const cached = await limiter.tryAcquire();
  assert.equal(cached.granted, false);
  assert.equal(cached.retryAfterMs, 400);
  assert.equal(await calls(), afterReject, 'a cached denial costs no command');
  // The next window: granted again, from a new batch.
  clock.advance(400);
  assert.equal((await limiter.tryAcquire()).granted, true);
  assert.equal(limiter.granted, 101);
});

test('two stores (two processes) on one key: each window admits exactly the limit, never more', async () => {
  clock.set(0);
  const otherClient = new Redis({ port: server.port });
  const other = redisStore({ client: otherClient, clock, timeoutMs: 5000 });
  const name = uniqueName();
  const spec = () => fixedWindow({ permitLimit: 50, window: 1000 });
  const a = store.limiter(spec(), { name, leases: true });
  const b = other.limiter(spec(), { name, leases: true });
  for (let window = 0; window < 3; window++) {
    let admitted = 0;
    for (let i = 0; i < 200; i++) {
      clock.set(window * 1000 + i * 4);
      const [x, y] = await Promise.all([a.tryAcquire(), b.tryAcquire(2)]);
      admitted += (x.granted ? 1 : 0) + (y.granted ? 2 : 0);
    }
    // Give-backs of unused batches let the other side use them; what is left may be a single permit that the
    // side asking for two cannot use.
    assert.ok(admitted <= 50 && admitted >= 49, `window ${window}: admitted ${admitted}`);
  }
  otherClient.disconnect();
});

test("permits left in a batch at its window end are void: the next window is the other process's alone", async () => {
  clock.set(0);
  const name = uniqueName();
  const spec = () => fixedWindow({ permitLimit: 50, window: 1000 });
  const a = store.limiter(spec(), { name, leases: true });
  const b = redisStore({ client, clock, timeoutMs: 5000 }).limiter(spec(), { name, leases: true });
  // A ramps up to a large batch late in window 0 and keeps some of it.
  for (let i = 0; i < 40; i++) {
    clock.set(900 + i);
    assert.equal((await a.tryAcquire()).granted, true);
  }
  clock.set(1000);
  // Window 1: B takes the whole limit; A's leftover from window 0 must not add to it.
  let admitted = 0;
  for (let i = 0; i < 60; i++) {
    clock.set(1000 + i);
    if ((await b.tryAcquire()).granted) admitted++;
    if ((await a.tryAcquire()).granted) admitted++;
  }
  assert.equal(admitted, 50);
});

test('sliding window: a batch is void at its segment end; each window admits at most the limit', async () => {
  clock.set(0);
  const limiter = store.limiter(slidingWindow({ permitLimit: 40, window: 400, segmentsPerWindow: 4 }), {
    name: uniqueName(),
    leases: true,
  });
  const perSegment: number[] = [];
  for (let t = 0; t < 2000; t += 2) {
    clock.set(t);
    const lease = await limiter.tryAcquire();
    const segment = Math.floor(t / 100);
    if (lease.granted) perSegment[segment] = (perSegment[segment] ?? 0) + 1;
  }
  for (let end = 3; end < perSegment.length; end++) {
    let sum = 0;
    for (let j = end - 3; j <= end; j++) sum += perSegment[j] ?? 0;
    assert.ok(sum <= 40, `segments ${end - 3}..${end}: ${sum}`);
  }
  assert.ok(perSegment.reduce((x, y) => x + (y ?? 0), 0) >= 40 * 4, 'the limit used window after window');
});

test('a refunded local grant goes back into the batch; the window can use it', async () => {
  clock.set(0);
  const limiter = store.limiter(fixedWindow({ permitLimit: 3, window: 1000 }), {
    name: uniqueName(),
    leases: true,
  });
  const leases = [];
  for (let i = 0; i < 3; i++) leases.push(await limiter.tryAcquire());
  assert.deepEqual(
    leases.map((l) => l.granted),
    [true, true, true],
  );
  assert.equal((await limiter.tryAcquire()).granted, false);
  leases[0].refund();
  // Rejected until the window's end as Redis said (a local denial only errs toward denying)…
  assert.equal((await limiter.tryAcquire()).granted, false);
  // …and in the next window nothing of this one is owed.
  clock.set(1000);
  assert.equal((await limiter.tryAcquire(3)).granted, true);
});

test('a refund after the batch ended goes back to Redis, to the segment it came from', async () => {
  clock.set(0);
  const name = uniqueName();
  const spec = () => slidingWindow({ permitLimit: 4, window: 400, segmentsPerWindow: 4 });
  const limiter = store.limiter(spec(), { name, leases: true });
  const strict = store.limiter(spec(), { name });
  const first = await limiter.tryAcquire(4);
  assert.equal(first.granted, true);
  clock.set(150); // a later segment: the batch is void, its segment still in the window
  assert.equal((await limiter.tryAcquire()).granted, false);
  assert.equal((await strict.statistics()).available, 0);
  first.refund();
  // The give-back is sent with the tick's other calls: the read after it sees it.
  assert.equal((await strict.statistics()).available, 4);
});

test("remaining is Redis's at this process's last take plus its batch: another process's grants are seen at the next take", async () => {
  clock.set(0);
  const name = uniqueName();
  const spec = () => fixedWindow({ permitLimit: 100, window: 1000 });
  const leased = store.limiter(spec(), { name, leases: true });
  const strict = store.limiter(spec(), { name });
  assert.equal((await leased.tryAcquire()).remaining, 99);
  // Batches of 1, 2 and 4 (demand doubling): after six grants Redis has 93 left and the batch holds one.
  let last = await leased.tryAcquire();
  for (let i = 0; i < 4; i++) last = await leased.tryAcquire();
  assert.equal(last.remaining, 93 + 1);
  // Another process takes 10.
  assert.equal((await strict.tryAcquire(10)).remaining, 83);
  // Not seen from the batch: Redis's 93 at the last take, and the batch now empty.
  const fromBatch = await leased.tryAcquire();
  assert.equal(fromBatch.remaining, 93);
  assert.equal(fromBatch.resetAfterMs, 1000);
  // Seen at the next take: 83 less this grant.
  assert.equal((await leased.tryAcquire()).remaining, 82);
});

test('a chain with a leased member is decided on Redis, all or nothing', async () => {
  clock.set(0);
  const name = uniqueName();
  const leased = store.limiter(fixedWindow({ permitLimit: 5, window: 1000 }), {
    name,
    hashTag: 'c',
    leases: true,
  });
  const other = store.limiter(fixedWindow({ permitLimit: 2, window: 1000 }), {
    name: uniqueName(),
    hashTag: 'c',
  });
  const chain = store.chain(leased, other);
  const before = await calls();
  assert.equal((await chain.tryAcquire()).granted, true);
  assert.equal((await chain.tryAcquire()).granted, true);
  assert.equal((await chain.tryAcquire()).granted, false);
  assert.equal((await calls()) - before, 3, 'one script call per chain decision');
  assert.equal(
    (await store.limiter(fixedWindow({ permitLimit: 5, window: 1000 }), { name, hashTag: 'c' }).statistics())
      .available,
    3,
  );
});

test('a batch left unused is given back within a few sweeps', async () => {
  clock.set(0);
  const name = uniqueName();
  const spec = () => fixedWindow({ permitLimit: 100, window: 60_000 });
  const leased = store.limiter(spec(), { name, leases: true });
  const strict = store.limiter(spec(), { name });
  for (let i = 0; i < 8; i++) assert.equal((await leased.tryAcquire()).granted, true); // batches 1, 2, 4, 8
  const heldAvailable = (await strict.statistics()).available;
  assert.ok(heldAvailable < 100 - 8, `the batch holds permits: ${heldAvailable} available`);
  // The sweeper runs on a timer every 50 ms; poll (bounded) until the unused permits are back.
  const deadline = Date.now() + 5000;
  while ((await strict.statistics()).available !== 100 - 8 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal((await strict.statistics()).available, 100 - 8);
});

test('a leased grant settles on Redis as a strict one does: the difference is charged or given back there', async () => {
  clock.set(0);
  const name = uniqueName();
  const spec = () => fixedWindow({ permitLimit: 100, window: 60_000 });
  const leased = store.limiter(spec(), { name, leases: true });
  const strict = store.limiter(spec(), { name });
  const settled = async (estimate: number, actual: number) => {
    const lease = await leased.tryAcquire(estimate);
    assert.equal(lease.granted, true);
    lease.settle(actual);
  };
  await settled(5, 12); // 7 more charged
  await settled(10, 4); // 6 given back
  // Once the sweeper has given the unused batch back, Redis counts exactly what was settled: 12 + 4.
  const deadline = Date.now() + 5000;
  while ((await strict.statistics()).available !== 100 - 16 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal((await strict.statistics()).available, 100 - 16);
});

test('onUnavailable answers a take Redis cannot serve', async () => {
  const broken = new Redis({ port: server.port, lazyConnect: true, enableOfflineQueue: false });
  const failing = redisStore({ client: broken, clock, timeoutMs: 50, onUnavailable: 'fail-closed' });
  const limiter = failing.limiter(fixedWindow({ permitLimit: 10, window: 1000 }), {
    name: uniqueName(),
    leases: true,
  });
  const lease = await limiter.tryAcquire();
  assert.equal(lease.granted, false);
  assert.equal(lease.reason, 'unavailable');
  assert.equal(failing.unavailable, 1);
  broken.disconnect();
});

test("leases: true, false or 'auto', for windows, token buckets and concurrency that do not count rejections", () => {
  const name = uniqueName();
  assert.throws(
    () => store.limiter(LOGIN(), { name, leases: true }),
    /store\.limiter: leases are for fixedWindow\(\.\.\.\), slidingWindow\(\.\.\.\), tokenBucket\(\.\.\.\) and concurrency\(\.\.\.\); got "lockout"/,
  );
  assert.throws(
    () =>
      store.limiter(tokenBucket({ tokenLimit: 5, tokensPerPeriod: 1, period: 1000, countRejected: true }), {
        name,
        leases: true,
      }),
    /countRejected must be false/,
  );
  assert.throws(
    () =>
      store.partitioned({
        name,
        key: (k: string) => k,
        limiter: LOGIN(),
        leases: true,
      }),
    /store\.partitioned: leases are for/,
  );
  assert.throws(
    () =>
      store.limiter(fixedWindow({ permitLimit: 5, window: 1000, countRejected: true }), {
        name,
        leases: true,
      }),
    /countRejected must be false/,
  );
  assert.throws(
    () => store.limiter(fixedWindow({ permitLimit: 5, window: 1000 }), { name, leases: 1 as never }),
    /store\.limiter: leases must be true, false or 'auto'; got 1/,
  );
  // Tiers: checked per key, when the key's limiter is first seen.
  const tiers = store.partitioned({
    name,
    key: (k: string) => k,
    limiter: (k) => (k === 'jobs' ? LOGIN() : fixedWindow({ permitLimit: 5, window: 1000 })),
    leases: true,
  });
  return assert.rejects(tiers.tryAcquire('jobs'), /limiter\("jobs"\): leases are for/);
});

test('an overdraw on a leased limiter bypasses the batch: Redis grants it when the whole limit is free', async () => {
  clock.set(10_000);
  for (const make of [
    () => fixedWindow({ permitLimit: 20, window: 1000, clock, overdraw: true, unit: 'tokens' }),
    () =>
      tokenBucket({
        tokenLimit: 20,
        tokensPerPeriod: 20,
        period: 1000,
        clock,
        overdraw: true,
        unit: 'tokens',
      }),
  ]) {
    const leased = store.limiter(make(), { name: uniqueName(), leases: true });
    const other = store.limiter(make(), { name: uniqueName(), leases: true });
    // A batch taken for a small grant: the limit is not whole on Redis, so an overdraw is refused.
    assert.equal((await leased.tryAcquire(1)).granted, true);
    const refused = await leased.tryAcquire(30);
    assert.equal(refused.granted, false);
    assert.equal(refused.reason, 'limit');
    // Untouched: granted by Redis, the 10 over the limit carried as debt.
    const before = await calls();
    assert.equal((await other.tryAcquire(30)).granted, true);
    assert.equal((await calls()) - before, 1, 'one command: no batch');
    assert.equal((await other.tryAcquire(1)).granted, false);
  }
});
