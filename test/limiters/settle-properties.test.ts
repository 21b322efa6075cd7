import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { fixedWindow, type Lease, slidingWindow, tokenBucket } from '../../src/index.ts';

const RUNS = Number(process.env.FLOODGATE_PROPERTY_RUNS ?? 200);
const LIMIT = 100;

const reserve = fc.record({ op: fc.constant('reserve' as const), estimate: fc.integer({ min: 1, max: 60 }) });
const settle = fc.record({
  op: fc.constant('settle' as const),
  pick: fc.nat(),
  actual: fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 200 })),
});
const refund = fc.record({ op: fc.constant('refund' as const), pick: fc.nat() });
const tick = fc.record({ op: fc.constant('tick' as const), dt: fc.integer({ min: 0, max: 700 }) });
/** A reservation above the limit (`overdraw: true`): granted only when the whole limit is free. */
const big = fc.record({
  op: fc.constant('reserve' as const),
  estimate: fc.integer({ min: LIMIT + 1, max: 3 * LIMIT }),
});

type Kind = 'fixed' | 'sliding' | 'stepped' | 'continuous';
const KINDS: Kind[] = ['fixed', 'sliding', 'stepped', 'continuous'];

/** Windows and periods of 1000 ms; the sliding window in 4 segments; buckets refill 10 each 100 ms. */
function build(kind: Kind, clock: { now(): number }, overdraw = false) {
  switch (kind) {
    case 'fixed':
      return fixedWindow({ permitLimit: LIMIT, window: 1000, clock, unit: 'tokens', overdraw });
    case 'sliding':
      return slidingWindow({
        permitLimit: LIMIT,
        window: 1000,
        segmentsPerWindow: 4,
        clock,
        unit: 'tokens',
        overdraw,
      });
    default:
      return tokenBucket({
        tokenLimit: LIMIT,
        tokensPerPeriod: 10,
        period: 100,
        replenishment: kind,
        clock,
        unit: 'tokens',
        overdraw,
      });
  }
}

interface Grant {
  lease: Lease;
  at: number;
  estimate: number;
  /** Its real cost once settled. */
  actual?: number;
  settledAt?: number;
  refunded?: boolean;
}

describe('settle: the accounting identity (fast-check, injected clock)', () => {
  for (const kind of KINDS) {
    test(`${kind}: while time stands still, every decision is the one Σ charged = limit − free implies`, () => {
      fc.assert(
        fc.property(fc.array(fc.oneof(reserve, reserve, settle, refund), { maxLength: 200 }), (ops) => {
          const limiter = build(kind, { now: () => 0 });
          const grants: Grant[] = [];
          // What each grant costs now: its estimate until settled, its actual after, nothing once refunded.
          const charged = () =>
            grants.reduce((sum, g) => sum + (g.refunded ? 0 : (g.actual ?? g.estimate)), 0);
          for (const step of ops) {
            if (step.op === 'reserve') {
              const lease = limiter.tryAcquire(step.estimate);
              assert.equal(lease.granted, LIMIT - charged() >= step.estimate, 'granted exactly when it fits');
              if (lease.granted) grants.push({ lease, at: 0, estimate: step.estimate });
            } else if (grants.length > 0) {
              const g = grants[step.pick % grants.length];
              if (step.op === 'refund') {
                g.lease.refund();
                if (g.actual === undefined) g.refunded = true;
              } else if (g.actual !== undefined || g.refunded) {
                assert.throws(() => g.lease.settle(step.actual));
              } else {
                g.lease.settle(step.actual);
                g.actual = step.actual;
              }
            }
            assert.equal(limiter.statistics().available, Math.max(0, LIMIT - charged()));
          }
        }),
        { numRuns: RUNS },
      );
    });

    for (const allowed of [false, true]) {
      const what = allowed
        ? 'with overdraw: true, + the excess over the limit of each reservation above it in the span'
        : '';
      // The span bound, and with overdraw reservations (permits > limit) among the grants, that bound plus each
      // one's excess (permits − limit): without the option those are RangeErrors; without the term it fails.
      const asks = allowed
        ? fc.oneof(reserve, reserve, big, settle, tick)
        : fc.oneof(reserve, reserve, settle, tick);
      test(`${kind}: over any span, cost admitted ≤ the span's capacity + the overdraws unsettled at its last grant + earlier leases' give-backs in it ${what}`, () => {
        fc.assert(
          fc.property(fc.array(asks, { maxLength: 150 }), (ops) => {
            let t = 0;
            const limiter = build(kind, { now: () => t }, allowed);
            const grants: Grant[] = [];
            for (const step of ops) {
              if (step.op === 'tick') t += step.dt;
              else if (step.op === 'reserve') {
                const lease = limiter.tryAcquire(step.estimate);
                if (lease.granted) grants.push({ lease, at: t, estimate: step.estimate });
              } else if (grants.length > 0) {
                const g = grants[step.pick % grants.length];
                if (g.actual === undefined) {
                  g.lease.settle(step.actual);
                  g.actual = step.actual;
                  g.settledAt = t;
                }
              }
            }
            // A lease never settled costs its estimate.
            const cost = (g: Grant) => g.actual ?? g.estimate;
            // Which overdraws the bound adds: those of leases unsettled at the span's last grant; on a sliding
            // window over several windows, every one (its debt leaves with its segment, it is not carried).
            const overdraw = (g: Grant, last: number, windows: number) =>
              (g.settledAt === undefined || g.settledAt < last) && !(kind === 'sliding' && windows > 1)
                ? 0
                : Math.max(0, cost(g) - g.estimate);
            for (const [from, to, windows] of spans(kind, grants, t)) {
              const inside = grants.filter((g) => g.at >= from && g.at <= to);
              if (inside.length === 0) continue;
              const last = inside[inside.length - 1].at;
              // A settle at the very instant of the last grant counts as unsettled then (the order within one
              // instant is not recorded): the bound is that much wider, never narrower.
              const admitted = inside.reduce((sum, g) => sum + cost(g), 0);
              const debt = inside.reduce((sum, g) => sum + overdraw(g, last, windows), 0);
              // What leases granted before the span gave back during it, up to its last grant, is capacity too.
              const credit = grants
                .filter(
                  (g) =>
                    g.at < from && g.settledAt !== undefined && g.settledAt >= from && g.settledAt <= last,
                )
                .reduce((sum, g) => sum + Math.max(0, g.estimate - cost(g)), 0);
              // An overdraw reservation's excess over the limit is debt taken at its grant: paid within the span
              // unless granted at its last grant (on a sliding window over several windows: never carried).
              const excess = inside
                .filter((g) => g.at === last || (kind === 'sliding' && windows > 1))
                .reduce((sum, g) => sum + Math.max(0, g.estimate - LIMIT), 0);
              const bound = capacity(kind, from, last, windows) + debt + credit + excess;
              assert.ok(admitted <= bound, `${admitted} admitted in [${from}, ${to}], bound ${bound}`);
            }
          }),
          { numRuns: RUNS },
        );
      });
    }
  }
});

/**
 * The spans checked, with how many windows long: runs of 1 to 3 windows (fixed), of 4 to 12 segments (sliding),
 * every pair of grant times (buckets).
 */
function spans(kind: Kind, grants: Grant[], end: number): [number, number, number][] {
  const out: [number, number, number][] = [];
  if (kind === 'fixed' || kind === 'sliding') {
    const step = kind === 'fixed' ? 1000 : 250;
    for (let s = 0; s <= end; s += step) {
      for (let windows = 1; windows <= 3; windows++) out.push([s, s + windows * 1000 - 0.001, windows]);
    }
  } else {
    const times = [...new Set(grants.map((g) => g.at))];
    for (const a of times) for (const b of times) if (a <= b) out.push([a, b, 0]);
  }
  return out;
}

/** What the limiter can let in from `from` to `last` (both grant times) in `windows` windows, debts aside. */
function capacity(kind: Kind, from: number, last: number, windows: number): number {
  if (kind === 'fixed' || kind === 'sliding') return windows * LIMIT;
  if (kind === 'continuous') return LIMIT + (last - from) * 0.1;
  // Stepped: 10 at each boundary (multiples of 100 ms) in (from, last].
  return LIMIT + 10 * (Math.floor(last / 100) - Math.floor(from / 100));
}
