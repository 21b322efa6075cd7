import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  concurrency,
  fixedWindow,
  type Lease,
  type RateLimiter,
  slidingWindow,
  tokenBucket,
} from '../../src/index.ts';
import { flush, type ManualClock, manualClock, track } from '../support/clock.ts';
import { Capacity, type ModelKind, ModelLimiter } from './model.ts';

type Op =
  | { op: 'try'; n: number }
  | { op: 'acquire'; n: number }
  | { op: 'abort'; pick: number }
  | { op: 'release'; pick: number }
  | { op: 'tick'; dt: number };

const RUNS = Number(process.env.FLOODGATE_PROPERTY_RUNS ?? 250);
const OPS = 400; // RUNS × OPS ≥ 100 000 operations per algorithm

function opArb(limit: number, withRelease: boolean): fc.Arbitrary<Op> {
  const ops: fc.Arbitrary<Op>[] = [
    fc.record({ op: fc.constant('try' as const), n: fc.integer({ min: 0, max: limit }) }),
    fc.record({ op: fc.constant('acquire' as const), n: fc.integer({ min: 0, max: limit }) }),
    fc.record({ op: fc.constant('abort' as const), pick: fc.nat() }),
    fc.record({
      op: fc.constant('tick' as const),
      dt: fc.oneof(
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 0, max: 5000 }),
      ),
    }),
  ];
  if (withRelease) ops.push(fc.record({ op: fc.constant('release' as const), pick: fc.nat() }));
  return fc.oneof(...ops);
}

function build(spec: ModelKind, clock: ManualClock, queueLimit: number, newestFirst: boolean): RateLimiter {
  const queue = {
    queueLimit,
    queueOrder: newestFirst ? ('newest-first' as const) : ('oldest-first' as const),
  };
  switch (spec.kind) {
    case 'fixed':
      return fixedWindow({ permitLimit: spec.limit, window: spec.window, clock, ...queue });
    case 'sliding':
      return slidingWindow({
        permitLimit: spec.limit,
        window: spec.window,
        segmentsPerWindow: spec.segments,
        clock,
        ...queue,
      });
    case 'stepped':
    case 'continuous':
      return tokenBucket({
        tokenLimit: spec.limit,
        tokensPerPeriod: spec.perPeriod,
        period: spec.period,
        replenishment: spec.kind === 'stepped' ? 'stepped' : 'continuous',
        clock,
        ...queue,
      });
    case 'concurrency':
      return concurrency({ permitLimit: spec.limit, clock, ...queue });
  }
}

function outcomeOf(state: { value?: Lease; error?: unknown; settled: boolean }): string {
  if (!state.settled) return 'waiting';
  if (state.error !== undefined) return 'aborted';
  if (state.value!.granted) return 'granted';
  return state.value!.reason === 'evicted' ? 'evicted' : 'rejected';
}

/** Checks the grant log against the limit directly: never more than the limit in any window. */
function checkWindows(spec: ModelKind, capacity: Capacity): void {
  if (spec.kind === 'fixed' || spec.kind === 'sliding') {
    const span = spec.kind === 'fixed' ? spec.window : spec.window / spec.segments;
    const reach = spec.kind === 'fixed' ? 1 : spec.segments;
    const bySpan = new Map<number, number>();
    for (const g of capacity.grants) {
      const k = Math.floor((g.t - capacity.origin) / span);
      bySpan.set(k, (bySpan.get(k) ?? 0) + g.n);
    }
    for (const k of bySpan.keys()) {
      let total = 0;
      for (let j = k - reach + 1; j <= k; j++) total += bySpan.get(j) ?? 0;
      assert.ok(total <= spec.limit, `window ending in span ${k} admitted ${total} > ${spec.limit}`);
    }
  }
}

async function run(spec: ModelKind, queueLimit: number, newestFirst: boolean, ops: Op[]): Promise<void> {
  const clock = manualClock(1000);
  const limiter = build(spec, clock, queueLimit, newestFirst);
  const capacity = new Capacity(spec, 1000);
  const model = new ModelLimiter(capacity, queueLimit, newestFirst);
  const tracked = new Map<number, { value?: Lease; error?: unknown; settled: boolean }>();
  const controllers = new Map<number, AbortController>();
  const released = new Set<number>();
  const requested = new Map<number, number>();
  const open = new Set<number>(); // requests whose outcome can still change
  const held: number[] = [];
  let id = 0;
  for (const op of ops) {
    const t = clock.now();
    switch (op.op) {
      case 'try': {
        const lease = limiter.tryAcquire(op.n);
        model.tryAcquire(t, ++id, op.n);
        tracked.set(id, { value: lease, settled: true });
        requested.set(id, op.n);
        break;
      }
      case 'acquire': {
        const controller = new AbortController();
        controllers.set(++id, controller);
        tracked.set(id, track(limiter.acquire(op.n, { signal: controller.signal })));
        requested.set(id, op.n);
        model.acquire(t, id, op.n);
        break;
      }
      case 'abort': {
        const waiting = model.queue.map((w) => w.id);
        if (waiting.length === 0) break;
        const victim = waiting[op.pick % waiting.length];
        controllers.get(victim)!.abort();
        model.abort(t, victim);
        break;
      }
      case 'release': {
        if (held.length === 0) break;
        const victim = held.splice(op.pick % held.length, 1)[0];
        released.add(victim);
        tracked.get(victim)!.value!.release();
        model.release(t, requested.get(victim)!);
        break;
      }
      case 'tick':
        clock.advance(op.dt);
        model.serve(clock.now());
        break;
    }
    await flush();
    if (op.op === 'try' || op.op === 'acquire') open.add(id);
    for (const k of open) {
      const outcome = outcomeOf(tracked.get(k)!);
      if (outcome !== model.outcome.get(k)) {
        assert.fail(
          `request ${k}: ${outcome}, model ${model.outcome.get(k)}, after ${JSON.stringify(op)} at ${t}`,
        );
      }
      if (outcome === 'waiting') continue;
      open.delete(k);
      if (outcome === 'granted') held.push(k);
    }
    const stats = limiter.statistics();
    const expected = Math.max(0, capacity.available(clock.now()));
    if (stats.available !== expected) {
      assert.fail(`available ${stats.available}, model ${expected} after ${JSON.stringify(op)}`);
    }
    assert.equal(
      stats.queued,
      model.queue.reduce((a, w) => a + w.n, 0),
    );
  }
  checkWindows(spec, capacity);
  // Nothing leaks: abort every waiter, release every lease; a concurrency limiter is whole again.
  for (const w of [...model.queue]) controllers.get(w.id)!.abort();
  await flush();
  for (const [k, state] of tracked) if (state.value?.granted && !released.has(k)) state.value.release();
  const stats = limiter.statistics();
  assert.equal(stats.queued, 0);
  if (spec.kind === 'concurrency') assert.equal(stats.available, spec.limit);
}

const queueArb = fc.record({ queueLimit: fc.integer({ min: 0, max: 6 }), newestFirst: fc.boolean() });

function property(name: string, specArb: fc.Arbitrary<ModelKind>, withRelease = false): void {
  test(`${name}: grants equal the reference model's over ${RUNS * OPS} random operations`, async () => {
    await fc.assert(
      fc.asyncProperty(
        specArb.chain((spec) =>
          fc.tuple(
            fc.constant(spec),
            queueArb,
            fc.array(opArb(spec.limit, withRelease), { minLength: OPS, maxLength: OPS }),
          ),
        ),
        async ([spec, queue, ops]) => run(spec, queue.queueLimit, queue.newestFirst, ops),
      ),
      { numRuns: RUNS },
    );
  });
}

property(
  'fixed window',
  fc.record({
    kind: fc.constant('fixed' as const),
    limit: fc.integer({ min: 1, max: 5 }),
    window: fc.integer({ min: 1, max: 100 }),
  }),
);
property(
  'sliding window',
  fc
    .record({
      limit: fc.integer({ min: 1, max: 5 }),
      segments: fc.integer({ min: 1, max: 5 }),
      seg: fc.integer({ min: 1, max: 30 }),
    })
    .map(({ limit, segments, seg }) => ({
      kind: 'sliding' as const,
      limit,
      segments,
      window: segments * seg,
    })),
);
property(
  'token bucket, stepped',
  fc
    .record({
      limit: fc.integer({ min: 1, max: 6 }),
      per: fc.integer({ min: 1, max: 6 }),
      period: fc.integer({ min: 1, max: 80 }),
    })
    .map(({ limit, per, period }) => ({
      kind: 'stepped' as const,
      limit,
      perPeriod: Math.min(per, limit),
      period,
    })),
);
property(
  'token bucket, continuous',
  fc
    .record({
      limit: fc.integer({ min: 1, max: 6 }),
      per: fc.integer({ min: 1, max: 6 }),
      period: fc.integer({ min: 1, max: 80 }),
    })
    .map(({ limit, per, period }) => ({
      kind: 'continuous' as const,
      limit,
      perPeriod: Math.min(per, limit),
      period,
    })),
);
property(
  'concurrency',
  fc.record({ kind: fc.constant('concurrency' as const), limit: fc.integer({ min: 1, max: 5 }) }),
  true,
);
