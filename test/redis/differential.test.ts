/**
 * Property: under random traffic (requests of random sizes, probes, clock moves, releases), every lease from the
 * Redis store equals the memory store's, field for field, for every algorithm, partitions and mixed chains.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import {
  chain,
  concurrency,
  fixedWindow,
  type Lease,
  partitioned,
  type RateLimiter,
  slidingWindow,
  tokenBucket,
} from '../../src/index.ts';
import { fields, startStore, type TestClock, uniqueName } from './twin.ts';

const RUNS = Number(process.env.FLOODGATE_REDIS_RUNS ?? 25);
const replay = process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH } : {};

let env: Awaited<ReturnType<typeof startStore>>;
before(async () => {
  env = await startStore();
});
after(() => env.stop());

type Make = (clock: TestClock) => RateLimiter;

const specs: Record<string, fc.Arbitrary<{ limit: number; make: Make }>> = {
  'fixed window': fc
    .record({
      limit: fc.integer({ min: 1, max: 6 }),
      window: fc.integer({ min: 1, max: 400 }),
      penalty: fc.boolean(),
    })
    .map(({ limit, window, penalty }) => ({
      limit,
      make: (clock) => fixedWindow({ permitLimit: limit, window, clock, countRejected: penalty }),
    })),
  'sliding window': fc
    .record({
      limit: fc.integer({ min: 1, max: 6 }),
      window: fc.integer({ min: 7, max: 400 }),
      segments: fc.integer({ min: 1, max: 7 }),
      penalty: fc.boolean(),
    })
    .map(({ limit, window, segments, penalty }) => ({
      limit,
      make: (clock) =>
        slidingWindow({
          permitLimit: limit,
          window,
          segmentsPerWindow: segments,
          clock,
          countRejected: penalty,
        }),
    })),
  'token bucket': fc
    .record({
      limit: fc.integer({ min: 1, max: 6 }),
      per: fc.integer({ min: 1, max: 6 }),
      period: fc.integer({ min: 1, max: 300 }),
      continuous: fc.boolean(),
    })
    .map(({ limit, per, period, continuous }) => ({
      limit,
      make: (clock) =>
        tokenBucket({
          tokenLimit: limit,
          tokensPerPeriod: Math.min(per, limit),
          period,
          replenishment: continuous ? 'continuous' : 'stepped',
          clock,
        }),
    })),
  concurrency: fc
    .integer({ min: 1, max: 6 })
    .map((limit) => ({ limit, make: (clock) => concurrency({ permitLimit: limit, clock }) })),
};

type Step =
  | { op: 'try'; n: number; key: number }
  | { op: 'tick'; dt: number }
  | { op: 'release'; pick: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('try' as const),
      n: fc.nat(),
      key: fc.integer({ min: 0, max: 2 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('tick' as const),
      dt: fc.oneof(
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 0, max: 2000 }),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('release' as const), pick: fc.nat() }) },
);

/** Runs `steps` against a memory decider and a Redis one; fails on the first differing lease. */
async function compare(
  limit: number,
  steps: Step[],
  memory: (n: number, key: string) => Lease,
  redis: (n: number, key: string) => Promise<Lease>,
  clock: TestClock,
): Promise<void> {
  const held: [Lease, Lease][] = [];
  for (const [i, s] of steps.entries()) {
    if (s.op === 'tick') clock.advance(s.dt);
    else if (s.op === 'release') {
      const pair = held.splice(s.pick % Math.max(1, held.length), 1)[0];
      pair?.[0].release();
      pair?.[1].release();
    } else {
      const n = s.n % (limit + 1);
      const key = `k${s.key}`;
      const remote = await redis(n, key);
      const local = memory(n, key);
      assert.deepEqual(fields(remote), fields(local), `step ${i} at t=${clock.now()}: ${n} for ${key}`);
      if (local.granted) held.push([local, remote]);
    }
  }
}

for (const [name, arb] of Object.entries(specs)) {
  test(`${name}: Redis leases equal memory's under random traffic (plain and partitioned)`, async () => {
    const { store, clock } = env;
    await fc.assert(
      fc.asyncProperty(arb, fc.array(step, { maxLength: 60 }), fc.boolean(), async (spec, steps, byKey) => {
        clock.set(1000);
        if (byKey) {
          const memory = partitioned({ key: (k: string) => k, limiter: spec.make(clock) });
          const redis = store.partitioned({
            name: uniqueName(),
            key: (k: string) => k,
            limiter: spec.make(clock),
          });
          await compare(
            spec.limit,
            steps,
            (n, k) => memory.tryAcquire(k, n),
            (n, k) => redis.tryAcquire(k, n),
            clock,
          );
        } else {
          const memory = spec.make(clock);
          const redis = store.limiter(spec.make(clock), { name: uniqueName() });
          await compare(
            spec.limit,
            steps,
            (n) => memory.tryAcquire(n),
            (n) => redis.tryAcquire(n),
            clock,
          );
        }
      }),
      { numRuns: RUNS, ...replay },
    );
  });
}

test('chains of mixed algorithms: Redis leases equal memory under random traffic', async () => {
  const { store, clock } = env;
  const all = Object.values(specs);
  const member = fc.oneof(...all);
  await fc.assert(
    fc.asyncProperty(
      fc.array(member, { minLength: 2, maxLength: 3 }),
      fc.array(step, { maxLength: 60 }),
      async (members, steps) => {
        clock.set(1000);
        const limit = Math.min(...members.map((m) => m.limit));
        const memory = chain(
          partitioned({ key: (k: string) => k, limiter: members[0].make(clock) }),
          ...members.slice(1).map((m) => m.make(clock)),
        );
        const redis = store.chain(
          store.partitioned({ name: uniqueName(), key: (k: string) => k, limiter: members[0].make(clock) }),
          ...members.slice(1).map((m) => store.limiter(m.make(clock), { name: uniqueName() })),
        );
        await compare(
          limit,
          steps,
          (n, k) => memory.tryAcquire(k, n),
          (n, k) => redis.tryAcquire(k, n),
          clock,
        );
      },
    ),
    { numRuns: RUNS * 2, ...replay },
  );
});
