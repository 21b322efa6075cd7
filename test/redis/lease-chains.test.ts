/**
 * A chain of leased members (issue 26 §1: chains all-or-nothing) on a real redis-server, on a hand-moved clock:
 * once its members' own decisions have taken batches, the chain is decided from them with no request to Redis;
 * when one member's batch cannot serve it, nothing is spent from the others and the chain is one round trip
 * (op `t`); and, through any interleaving of two processes' member and chain decisions, no member's window
 * admits more than its limit. The ops are those the engine encodes (a give-back, op `g`, is the sweeper's).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { fixedWindow, slidingWindow, tokenBucket } from '../../src/index.ts';
import type { Lease } from '../../src/limiters/lease.ts';
import type { Engine } from '../../src/redis/engine.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { type TestClock, testClock, uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let clock: TestClock;
let store: RedisStore;
/** The ops every engine encoded (decisions, takes), give-backs left out. */
const ops: string[] = [];

const engineOf = (s: RedisStore) => (s as unknown as { context: { engine: Engine } }).context.engine;

function recorded(s: RedisStore): RedisStore {
  const engine = engineOf(s);
  const encode = engine.encodeArgs.bind(engine);
  engine.encodeArgs = (args, binding, op, ...rest) => {
    if (op !== 'g') ops.push(op);
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

  // b's batch is empty: nothing is spent from a's, and the chain is one round trip.
  clock.advance(1);
  const fromRedis = await chain.tryAcquire();
  assert.equal(fromRedis.granted, true);
  assert.deepEqual(ops.slice(start), ['t']);
  assert.equal(free(store, aKey), held[0] - held[1]);
  // Redis counted that one grant and none of the local ones (their permits were counted at the takes).
  assert.equal((await strict(aName).statistics()).available, inRedis[0] - 1);
  assert.equal((await strict(bName).statistics()).available, inRedis[1] - 1);

  // A local chain grant refunded goes back into each member's batch, with no request.
  const mark = ops.length;
  last.refund();
  assert.deepEqual([free(store, aKey), free(store, bKey)], [held[0] - held[1] + 1, 1]);
  assert.deepEqual(ops.slice(mark), []);
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
  clock.set(1000); // the batches' window ended: void
  start = ops.length;
  assert.equal((await store.chain(a, b).tryAcquire()).granted, true);
  assert.deepEqual(ops.slice(start), ['t']);
});

test('two processes, member and chain decisions interleaved: no member window admits more than its limit', async () => {
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
  // Chain decisions made, and those that asked Redis (op `t`: the members' own decisions take, op `l`).
  let chains = 0;
  const asked = ops.length;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('fixed', 'sliding'),
        fc.array(fc.array(step, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 60 }),
        async (kind, rounds) => {
          const limits = [60, 40];
          const make = (limit: number) =>
            kind === 'fixed'
              ? fixedWindow({ permitLimit: limit, window: 100 })
              : slidingWindow({ permitLimit: limit, window: 100, segmentsPerWindow: 4 });
          const origin = clock.now(); // the limiters' t = 0 (made on the test clock)
          const names = [uniqueName(), uniqueName()];
          const sides = [store, other].map((s) => {
            const a = s.limiter(make(limits[0]), { name: names[0], hashTag: 'lm', leases: true });
            const b = s.limiter(make(limits[1]), { name: names[1], hashTag: 'lm', leases: true });
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
                    chains++;
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
        },
      ),
      { numRuns: 60 },
    );
    const overRedis = ops.slice(asked).filter((op) => op === 't').length;
    assert.ok(overRedis < chains, `${chains - overRedis} of ${chains} chain decisions made from batches`);
  } finally {
    otherClient.disconnect();
  }
});
