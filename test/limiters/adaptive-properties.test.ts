import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { adaptiveConcurrency, type Lease, type Priority } from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

type Op =
  | { op: 'try'; priority: Priority }
  | { op: 'acquire'; priority: Priority }
  | { op: 'abort'; pick: number }
  | { op: 'release'; pick: number; outcome: 'ok' | 'dropped' | 'ignore' }
  | { op: 'tick'; dt: number };

const RUNS = Number(process.env.FLOODGATE_PROPERTY_RUNS ?? 150);
const priority = fc.constantFrom<Priority>('critical', 'default', 'sheddable', 5, -1);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('try' as const), priority }),
  fc.record({ op: fc.constant('acquire' as const), priority }),
  fc.record({ op: fc.constant('abort' as const), pick: fc.nat() }),
  fc.record({
    op: fc.constant('release' as const),
    pick: fc.nat(),
    outcome: fc.constantFrom('ok' as const, 'dropped' as const, 'ignore' as const),
  }),
  fc.record({
    op: fc.constant('tick' as const),
    dt: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 300 })),
  }),
);

/**
 * The invariants, for every algorithm, reserve and queue order:
 * - a grant happens only under the limit: ordering the leases still held by grant, the k-th was granted while the
 *   limit was ≥ k (so in flight exceeds the current limit only by leases granted before it was lowered);
 * - in flight is exactly the leases the caller holds (each released once; a second release is a no-op) and
 *   queued is exactly the waiters still pending: an aborted, evicted or expired waiter is charged nothing;
 * - the limit stays within [minLimit, maxLimit], in statistics and in every onLimitChange.
 */
test('adaptive concurrency: grants under the limit, exact in-flight and queue accounting, limit within bounds', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        algorithm: fc.constantFrom('gradient' as const, 'vegas' as const, 'aimd' as const),
        minLimit: fc.integer({ min: 1, max: 4 }),
        span: fc.integer({ min: 0, max: 12 }),
        queueLimit: fc.integer({ min: 0, max: 6 }),
        lifo: fc.boolean(),
        reserve: fc.option(fc.double({ min: 0, max: 0.5, noNaN: true }), { nil: undefined }),
      }),
      fc.array(opArb, { minLength: 1, maxLength: 300 }),
      async (config, ops) => {
        const clock = manualClock(0);
        const minLimit = config.minLimit;
        const maxLimit = minLimit + config.span;
        const limits: number[] = [];
        const limiter = adaptiveConcurrency({
          clock,
          algorithm: config.algorithm,
          minLimit,
          maxLimit,
          window: 10,
          minSamples: 2,
          queueLimit: config.queueLimit,
          queueOrder: config.lifo ? 'newest-first' : 'oldest-first',
          classes: config.reserve === undefined ? undefined : { reserve: { critical: config.reserve } },
          ...(config.algorithm === 'aimd' ? { timeout: 40 } : { probeInterval: 200, shiftWindows: 3 }),
          onLimitChange: (limit) => limits.push(limit),
        });
        const held: Lease[] = []; // in grant order
        const released = new Set<Lease>();
        const waiting: { state: ReturnType<typeof track<Lease>>; controller: AbortController }[] = [];
        const collect = () => {
          for (let i = 0; i < waiting.length; ) {
            const w = waiting[i];
            if (!w.state.settled) {
              i++;
              continue;
            }
            waiting.splice(i, 1);
            if (w.state.value?.granted) held.push(w.state.value);
          }
        };
        for (const op of ops) {
          if (op.op === 'try') {
            const lease = limiter.tryAcquire(1, op.priority);
            if (lease.granted) held.push(lease);
          } else if (op.op === 'acquire') {
            const controller = new AbortController();
            const state = track(limiter.acquire(1, { priority: op.priority, signal: controller.signal }));
            waiting.push({ state, controller });
          } else if (op.op === 'abort') {
            if (waiting.length > 0)
              waiting[op.pick % waiting.length].controller.abort(new Error('cancelled'));
          } else if (op.op === 'release') {
            const all = [...held, ...released];
            if (all.length > 0) {
              const lease = all[op.pick % all.length];
              const outcome = op.outcome === 'ok' ? undefined : { [op.outcome]: true };
              lease.release(outcome);
              if (!released.has(lease)) {
                released.add(lease);
                held.splice(held.indexOf(lease), 1);
              }
            }
          } else {
            clock.advance(op.dt);
          }
          await flush();
          collect();
          const stats = limiter.statistics();
          assert.ok(stats.limit >= minLimit && stats.limit <= maxLimit, `limit ${stats.limit} in bounds`);
          assert.equal(stats.inFlight, held.length, 'in flight = leases held');
          assert.equal(stats.queued, waiting.length, 'queued = waiters pending');
          held.forEach((lease, k) => {
            assert.ok(
              lease.limit >= k + 1,
              `lease ${k + 1} of ${held.length} granted under limit ${lease.limit}`,
            );
          });
        }
        for (const limit of limits) assert.ok(limit >= minLimit && limit <= maxLimit);
        for (const w of waiting) w.controller.abort(new Error('end'));
        for (const lease of held) lease.release();
        await flush();
        assert.equal(limiter.statistics().inFlight, 0);
        assert.equal(limiter.statistics().queued, 0);
      },
    ),
    { numRuns: RUNS },
  );
});
