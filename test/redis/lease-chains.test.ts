/**
 * A chain of leased members (issue 26 §1: chains all-or-nothing) on a real redis-server, on a hand-moved clock:
 * once its members' batches are warm (taken by their own decisions, or by the chain's round trips), the chain is
 * decided from them with no request to Redis; when one member's batch cannot serve it, nothing is spent from the
 * others and the chain is one round trip (op `t`), in which what the batches hold is given back first (op `g`)
 * and new batches taken after (op `l`); `leases: 'auto'` members are promoted by chain decisions alone; and,
 * through any interleaving of two processes' member and chain decisions, no member's window admits more than its
 * limit. The ops are those the engine encodes (give-backs, op `g`, counted apart: the sweeper's are on real time).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { fixedWindow, slidingWindow, tokenBucket } from '../../src/index.ts';
import type { Lease } from '../../src/limiters/lease.ts';
import type { Engine } from '../../src/redis/engine.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { INTERVAL_MS, PROMOTE_COUNT } from '../../src/redis/lease-policy.ts';
import { RedisServer } from '../support/redis-server.ts';
import { type TestClock, testClock, uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let clock: TestClock;
let store: RedisStore;
/** The ops every engine encoded (decisions, takes), give-backs left out. */
const ops: string[] = [];
/** Give-backs (op `g`) every engine encoded: the sweeper's, on the machine's time. */
let gives = 0;

const engineOf = (s: RedisStore) => (s as unknown as { context: { engine: Engine } }).context.engine;

function recorded(s: RedisStore): RedisStore {
  const engine = engineOf(s);
  const encode = engine.encodeArgs.bind(engine);
  engine.encodeArgs = (args, binding, op, ...rest) => {
    if (op !== 'g') ops.push(op);
    else gives++;
    encode(args, binding, op, ...rest);
  };
  return s;
}

/** A limiter's Redis key. */
const keyOf = (limiter: object) => (limiter as { member: { key: string } }).member.key;

/** Permits this process holds free in `key`'s batch (what the chain may spend). */
function free(s: RedisStore, key: string): number {
  const leases = (engineOf(s) as unknown as { leases: { free(key: string, now: number): number } }).leases;
  return leases.free(key, clock.now());
}

/** Script calls Redis ran so far (`FCALL`: one per round trip, whatever it carries). */
async function fcalls(): Promise<number> {
  return Number(/cmdstat_fcall:calls=(\d+)/.exec(String(await client.info('commandstats')))?.[1] ?? 0);
}

/** Whether `key` is hot (leased) for `leases: 'auto'` in `s`. */
const isHot = (s: RedisStore, key: string) =>
  (engineOf(s) as unknown as { leasePolicy: { isHot(key: string): boolean } }).leasePolicy.isHot(key);

before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  clock = testClock(0);
  store = recorded(redisStore({ client, clock, timeoutMs: 5000 }));
});
after(async () => {
  client.disconnect();
  await server.stop();
});

test('a chain of leased windows decides from warm batches with no request, all or nothing, else one round trip', async () => {
  clock.set(0);
  const spec = () => fixedWindow({ permitLimit: 1000, window: 10_000 });
  const aName = uniqueName();
  const bName = uniqueName();
  const a = store.limiter(spec(), { name: aName, hashTag: 'lc', leases: true });
  const b = store.limiter(spec(), { name: bName, hashTag: 'lc', leases: true });
  const chain = store.chain(a, b);
  // Warm: each member's own decisions take batches (a's demand twice b's, so its batch is the larger).
  for (let i = 0; i < 40; i++) {
    clock.advance(1);
    assert.equal((await a.tryAcquire()).granted, true);
    assert.equal((await a.tryAcquire()).granted, true);
    assert.equal((await b.tryAcquire()).granted, true);
  }
  const aKey = keyOf(a);
  const bKey = keyOf(b);
  const held = [free(store, aKey), free(store, bKey)];
  assert.ok(held[1] >= 2 && held[0] > held[1], `batches hold ${held}`);
  const strict = (name: string) => store.limiter(spec(), { name, hashTag: 'lc' });
  const inRedis = [
    (await strict(aName).statistics()).available,
    (await strict(bName).statistics()).available,
  ];

  // Every member's batch holds the permits: decided here, no request at all.
  const start = ops.length;
  const leases: Lease[] = [];
  for (let i = 0; i < held[1]; i++) {
    clock.advance(1);
    const lease = await chain.tryAcquire();
    assert.equal(lease.granted, true);
    leases.push(lease);
  }
  assert.deepEqual(ops.slice(start), [], 'no request for a chain its batches can serve');
  assert.deepEqual([free(store, aKey), free(store, bKey)], [held[0] - held[1], 0]);
  // The fields a Redis answer gives: the member with least left, its window's reset; a lease per member.
  const last = leases[leases.length - 1];
  assert.equal(last.members?.length, 2);
  assert.equal(last.remaining, Math.min(...last.members!.map((l) => l.remaining)));
  assert.equal(last.resetAfterMs, 10_000 - clock.now());
  assert.equal(a.granted, 80 + held[1]);

  // b's batch is empty: the chain is one round trip, which gives back what a's batch holds (Redis decides the
  // chain on every permit not spent, as without leases), then takes new batches for both, in the same call.
  clock.advance(1);
  const aHeld = free(store, aKey);
  assert.equal(aHeld, held[0] - held[1]);
  const given = gives;
  const fromRedis = await chain.tryAcquire();
  assert.equal(fromRedis.granted, true);
  assert.deepEqual(ops.slice(start).sort(), ['l', 'l', 't']); // encoded in this order, sent decision first
  assert.equal(gives - given, 1, "a's batch given back");
  const now = [free(store, aKey), free(store, bKey)];
  assert.ok(now[0] > 0 && now[1] > 0, `new batches: ${now}`);
  // Redis counted that one grant and the new batches, none of the local grants (counted at the takes).
  assert.equal((await strict(aName).statistics()).available, inRedis[0] + aHeld - 1 - now[0]);
  assert.equal((await strict(bName).statistics()).available, inRedis[1] - 1 - now[1]);

  // A local chain grant refunded goes back into each member's batch (the same window's), with no request.
  const mark = ops.length;
  last.refund();
  assert.deepEqual([free(store, aKey), free(store, bKey)], [now[0] + 1, now[1] + 1]);
  assert.deepEqual(ops.slice(mark), []);
});

test("a chain's round trip takes batches for its leased members, in the same call: its next decisions are local", async () => {
  clock.set(0);
  const limit = 10_000;
  const spec = () => fixedWindow({ permitLimit: limit, window: 60_000 });
  const names = [uniqueName(), uniqueName()];
  const [a, b] = names.map((name) => store.limiter(spec(), { name, hashTag: 'lc', leases: true }));
  const chain = store.chain(a, b);
  // No member decided alone: the batches are the chain's own.
  const start = ops.length;
  const calls = await fcalls();
  const given = gives;
  for (let i = 0; i < 400; i++) {
    clock.advance(1);
    assert.equal((await chain.tryAcquire()).granted, true);
  }
  const sent = ops.slice(start);
  const tries = sent.filter((op) => op === 't').length;
  assert.ok(tries <= 40, `${tries} of 400 chain decisions asked Redis: ${sent.join('')}`);
  assert.ok(sent.includes('l'), 'the round trips took batches');
  // One script call per round trip: the takes ride in the chain's (give-backs, the sweeper's, may add some).
  const spent = (await fcalls()) - calls - 1; // this read's own INFO is not a call; the last line's is
  assert.ok(spent <= tries + (gives - given), `${spent} calls for ${tries} round trips`);
  // Exact: Redis counted every grant and what the batches hold, nothing else.
  for (const [i, name] of names.entries()) {
    const inRedis = (await store.limiter(spec(), { name, hashTag: 'lc' }).statistics()).available;
    assert.equal(inRedis + free(store, keyOf([a, b][i])), limit - 400, name);
  }
});

test("a chain of leases: 'auto' members: hot through the chain alone, its keys are leased and it decides from batches, exactly", async () => {
  clock.set(0);
  const limits = [100_000, 600];
  const names = [uniqueName(), uniqueName()];
  const [a, b] = names.map((name, i) =>
    store.limiter(fixedWindow({ permitLimit: limits[i], window: '1h' }), {
      name,
      hashTag: 'lc',
      leases: 'auto',
    }),
  );
  const chain = store.chain(a, b);
  const keys = [keyOf(a), keyOf(b)];
  // Cold (5 decisions an interval, half the promotion rate): exact, one try each.
  let start = ops.length;
  for (let i = 0; i < 30; i++) {
    clock.advance(INTERVAL_MS / (PROMOTE_COUNT / 2));
    assert.equal((await chain.tryAcquire()).granted, true);
  }
  assert.deepEqual(ops.slice(start), Array(30).fill('t'));
  assert.deepEqual(
    keys.map((k) => isHot(store, k)),
    [false, false],
  );
  // Hot (a decision a millisecond) until b's limit is reached, and past it.
  start = ops.length;
  const leases: Lease[] = [];
  let full = 0; // the ops sent until the first rejection
  for (let i = 0; i < 1000; i++) {
    clock.advance(1);
    const lease = await chain.tryAcquire();
    if (!lease.granted && full === 0) full = ops.length;
    leases.push(lease);
  }
  assert.deepEqual(
    keys.map((k) => isHot(store, k)),
    [true, true],
    'promoted by the chain decisions',
  );
  const granted = leases.filter((l) => l.granted).length;
  // Never over the limit, and nothing short of it while b had permits: all b's window admitted.
  assert.equal(30 + granted, limits[1]);
  assert.ok(
    leases.slice(0, granted).every((l) => l.granted),
    'every grant before the first rejection',
  );
  const sent = ops.slice(start, full);
  const tries = sent.filter((op) => op === 't').length;
  assert.ok(
    tries < granted / 4,
    `${tries} of ${granted} granted chain decisions asked Redis: ${sent.join('')}`,
  );
  // All or nothing, and exact: each member counted every chain grant once, with what its batch holds.
  assert.equal(a.granted, limits[1]);
  assert.equal(b.granted, limits[1]);
  for (const [i, name] of names.entries()) {
    const strict = store.limiter(fixedWindow({ permitLimit: limits[i], window: '1h' }), {
      name,
      hashTag: 'lc',
    });
    // Read once nothing is under way: a batch the last round trip took, given back by the sweeper between the two
    // reads, would be counted in neither (or both). A permit lost or counted twice stays so: the deadline fails.
    const deadline = Date.now() + 2000;
    let total = Number.NaN;
    while (Date.now() < deadline) {
      const inRedis = (await strict.statistics()).available;
      total = inRedis + free(store, keys[i]);
      if (total === limits[i] - limits[1]) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(total, limits[i] - limits[1], name);
  }
});

test('decisions of one moment wait for the takes of the chain round trip under way, not each asking Redis', async () => {
  clock.set(0);
  const spec = () => fixedWindow({ permitLimit: 100_000, window: 60_000 });
  const [a, b] = [0, 1].map(() => store.limiter(spec(), { name: uniqueName(), hashTag: 'lc', leases: true }));
  const chain = store.chain(a, b);
  // Warm: a decision a millisecond, so that a take holds about 50 ms of that demand.
  for (let i = 0; i < 300; i++) {
    clock.advance(1);
    await chain.tryAcquire();
  }
  // A burst in one moment, three times what the batches hold: a round trip per take, not per decision.
  const held = Math.min(free(store, keyOf(a)), free(store, keyOf(b)));
  assert.ok(held >= 10, `batches hold ${held}`);
  const start = ops.length;
  const burst = await Promise.all(Array.from({ length: 3 * held }, () => chain.tryAcquire()));
  assert.ok(
    burst.every((l) => l.granted),
    'all granted',
  );
  const tries = ops.slice(start).filter((op) => op === 't').length;
  assert.ok(tries <= 5, `${tries} round trips for ${3 * held} decisions (batches held ${held})`);
});

test('a chain mixing units (requests and tokens), both leased: one request counted per decision, whatever its tokens', async () => {
  clock.set(0);
  const requests = store.limiter(fixedWindow({ permitLimit: 1000, window: 60_000 }), {
    name: uniqueName(),
    hashTag: 'lc',
    leases: true,
  });
  const tokens = store.limiter(fixedWindow({ permitLimit: 100_000, window: 60_000, unit: 'tokens' }), {
    name: uniqueName(),
    hashTag: 'lc',
    leases: true,
  });
  // Warm both batches by their own decisions, then decide the chain: 5 tokens, one request, each time.
  for (let i = 0; i < 40; i++) {
    clock.advance(1);
    await requests.tryAcquire();
    await tokens.tryAcquire(5);
  }
  const before = [requests.granted, tokens.granted];
  const chain = store.chain(requests, tokens);
  for (let i = 0; i < 20; i++) {
    clock.advance(1);
    assert.equal((await chain.tryAcquire(5)).granted, true);
  }
  assert.deepEqual([requests.granted - before[0], tokens.granted - before[1]], [20, 20]);
  // Redis and the batches together: 1 000 requests less 60 made (one each), 100 000 tokens less 300.
  const inRedis = async (limiter: typeof requests, limit: number, unit?: 'tokens') =>
    (
      await store
        .limiter(fixedWindow({ permitLimit: limit, window: 60_000, unit }), {
          name: limiter.name,
          hashTag: 'lc',
        })
        .statistics()
    ).available + free(store, keyOf(limiter));
  assert.equal(await inRedis(requests, 1000), 1000 - 60);
  assert.equal(await inRedis(tokens, 100_000, 'tokens'), 100_000 - 300);
});

test('a chain of leased token buckets decides from warm batches with no request', async () => {
  clock.set(0);
  const spec = () => tokenBucket({ tokenLimit: 10_000, tokensPerPeriod: 1, period: 1000 });
  const a = store.limiter(spec(), { name: uniqueName(), hashTag: 'lc', leases: true });
  const b = store.limiter(spec(), { name: uniqueName(), hashTag: 'lc', leases: true });
  // Warm until both batches hold a few tokens (a bucket's batch is sized within 1 % of tokenLimit).
  const held = () => Math.min(free(store, keyOf(a)), free(store, keyOf(b)));
  for (let i = 0; i < 300 && held() < 3; i++) {
    clock.advance(1);
    await a.tryAcquire();
    await b.tryAcquire();
  }
  const n = held();
  assert.ok(n >= 2, `batches hold ${n}`);
  const start = ops.length;
  for (let i = 0; i < n; i++) assert.equal((await store.chain(a, b).tryAcquire()).granted, true);
  assert.deepEqual(ops.slice(start), []);
  assert.equal(Math.min(free(store, keyOf(a)), free(store, keyOf(b))), 0);
});

test('a chain with a member not leased, or whose batch ended with its window, asks Redis', async () => {
  clock.set(0);
  const spec = () => fixedWindow({ permitLimit: 100, window: 1000 });
  const a = store.limiter(spec(), { name: uniqueName(), hashTag: 'lc', leases: true });
  const b = store.limiter(spec(), { name: uniqueName(), hashTag: 'lc', leases: true });
  const c = store.limiter(spec(), { name: uniqueName(), hashTag: 'lc' });
  for (let i = 0; i < 20; i++) {
    clock.advance(1);
    await a.tryAcquire();
    await b.tryAcquire();
    await c.tryAcquire();
  }
  let start = ops.length;
  assert.equal((await store.chain(a, c).tryAcquire()).granted, true);
  assert.deepEqual(ops.slice(start), ['t']);
  clock.set(1000); // the batches' window ended: void (the round trip takes new ones)
  start = ops.length;
  assert.equal((await store.chain(a, b).tryAcquire()).granted, true);
  assert.deepEqual(ops.slice(start).sort(), ['l', 'l', 't']);
});

test("two processes, member and chain decisions interleaved, leases true or 'auto': no member window admits more than its limit", async () => {
  const otherClient = new Redis({ port: server.port });
  const other = recorded(redisStore({ client: otherClient, clock, timeoutMs: 5000 }));
  type Step = { dt: number; who: number; what: 'a' | 'b' | 'chain'; permits: number; times: number };
  const step: fc.Arbitrary<Step> = fc.record({
    dt: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 60 })),
    who: fc.integer({ min: 0, max: 1 }),
    what: fc.constantFrom('a' as const, 'b' as const, 'chain' as const, 'chain' as const),
    permits: fc.integer({ min: 1, max: 3 }),
    times: fc.integer({ min: 1, max: 12 }),
  });
  // Chain decisions made with leases: true, and those that asked Redis (op `t`: the members' own decisions take,
  // op `l`; with 'auto' a cold member's own decisions are tries too, so only leases: true runs are counted).
  let chains = 0;
  let overRedis = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('fixed', 'sliding'),
        fc.constantFrom(true as const, 'auto' as const),
        fc.array(fc.array(step, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 60 }),
        async (kind, leases, rounds) => {
          const asked = ops.length;
          let chainsHere = 0;
          const limits = [60, 40];
          const make = (limit: number) =>
            kind === 'fixed'
              ? fixedWindow({ permitLimit: limit, window: 100 })
              : slidingWindow({ permitLimit: limit, window: 100, segmentsPerWindow: 4 });
          const origin = clock.now(); // the limiters' t = 0 (made on the test clock)
          const names = [uniqueName(), uniqueName()];
          const sides = [store, other].map((s) => {
            const a = s.limiter(make(limits[0]), { name: names[0], hashTag: 'lm', leases });
            const b = s.limiter(make(limits[1]), { name: names[1], hashTag: 'lm', leases });
            return { a, b, chain: s.chain(a, b) };
          });
          // Grants per member in each window (a sliding window's, in each segment), by the time they were made.
          const span = kind === 'fixed' ? 100 : 25;
          const grants: number[][] = [[], []];
          const count = (member: number, _lease: Lease, now: number, permits: number) => {
            const i = Math.floor((now - origin) / span);
            grants[member][i] = (grants[member][i] ?? 0) + permits;
          };
          let now = clock.now() + 10_000;
          // Each process's members start with batches of their own demand (as a hot key's do).
          clock.set(now);
          for (const side of sides) {
            for (let i = 0; i < 6; i++) {
              for (const member of [0, 1]) {
                const lease = await (member === 0 ? side.a : side.b).tryAcquire();
                if (lease.granted) count(member, lease, now, 1);
              }
            }
          }
          for (const round of rounds) {
            for (const s of round) now += s.dt;
            clock.set(now);
            await Promise.all(
              // One instant per round: every answer of the round is computed on it.
              round.map(async (s) => {
                const at = now;
                const side = sides[s.who];
                // A few decisions in a row (a member's demand is what sizes its batches).
                for (let i = 0; i < s.times; i++) {
                  if (s.what === 'chain') {
                    chainsHere++;
                    const lease = await side.chain.tryAcquire(s.permits);
                    if (lease.granted) {
                      count(0, lease.members![0], at, s.permits);
                      count(1, lease.members![1], at, s.permits);
                    }
                  } else {
                    const member = s.what === 'a' ? 0 : 1;
                    const lease = await (member === 0 ? side.a : side.b).tryAcquire(s.permits);
                    if (lease.granted) count(member, lease, at, s.permits);
                  }
                }
              }),
            );
          }
          for (const member of [0, 1]) {
            // A window: one span (fixed), or four segments (sliding).
            const width = kind === 'fixed' ? 1 : 4;
            for (let end = 0; end < grants[member].length; end++) {
              let sum = 0;
              for (let k = Math.max(0, end - width + 1); k <= end; k++) sum += grants[member][k] ?? 0;
              assert.ok(sum <= limits[member], `member ${member}, window ending at span ${end}: ${sum}`);
            }
          }
          if (leases === true) {
            chains += chainsHere;
            overRedis += ops.slice(asked).filter((op) => op === 't').length;
          }
        },
      ),
      { numRuns: 60 },
    );
    assert.ok(overRedis < chains, `${chains - overRedis} of ${chains} chain decisions made from batches`);
  } finally {
    otherClient.disconnect();
  }
});
