import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { chain, fixedWindow, type Lease, lockout, partitioned } from '../../src/index.ts';

const RUNS = Number(process.env.FLOODGATE_PROPERTY_RUNS ?? 200);

function clockAt(start = 1000) {
  let t = start;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

/** A failure: a granted attempt that is not refunded. */
function fail(limiter: { tryAcquire(): Lease }): Lease {
  return limiter.tryAcquire();
}

describe('lockout', () => {
  test('the Nth failure is granted and starts the lockout; the next is refused with the time left', () => {
    const clock = clockAt();
    const l = lockout({ failures: 3, within: '1m', lockFor: '10s', clock });
    assert.equal(fail(l).granted, true);
    clock.advance(1000);
    assert.equal(fail(l).granted, true);
    const nth = fail(l);
    assert.equal(nth.granted, true, 'the third failure ran');
    assert.equal(nth.remaining, 0);
    assert.equal(nth.resetAfterMs, 10_000, 'its fields say when the lockout ends');
    clock.advance(4000);
    const refused = l.tryAcquire();
    assert.equal(refused.granted, false);
    assert.equal(refused.reason, 'locked');
    assert.equal(refused.retryAfterMs, 6000, 'the time left on the lockout, not the window');
    assert.equal(refused.resetAfterMs, 6000);
    assert.equal(l.lockedForMs(), 6000);
    clock.advance(6000);
    assert.equal(l.lockedForMs(), 0);
    assert.equal(l.tryAcquire().granted, true, 'over at its end');
  });

  test('failures spread wider than the window never lock', () => {
    const clock = clockAt();
    const l = lockout({ failures: 3, within: '1m', lockFor: '10s', clock });
    for (let i = 0; i < 20; i++) {
      assert.equal(fail(l).granted, true, `attempt ${i}`);
      if (i % 2 === 1) clock.advance(60_000);
    }
  });

  test('each lockout within the memory period lasts factor times longer, up to the maximum', () => {
    const clock = clockAt();
    const m = lockout({ failures: 2, within: '1m', lockFor: '10s', factor: 3, maxLockFor: '60s', clock });
    const lengths: number[] = [];
    for (let i = 0; i < 4; i++) {
      fail(m);
      fail(m);
      lengths.push(m.lockedForMs());
      clock.advance(m.lockedForMs());
    }
    assert.deepEqual(lengths, [10_000, 30_000, 60_000, 60_000]);
  });

  test('the memory period counts from the end of the last lockout', () => {
    const clock = clockAt();
    const l = lockout({
      failures: 1,
      within: '1m',
      lockFor: '10s',
      factor: 2,
      maxLockFor: '1h',
      memory: '30s',
      clock,
    });
    fail(l);
    clock.advance(10_000 + 29_999);
    fail(l);
    assert.equal(l.lockedForMs(), 20_000, 'within 30 s of the end: longer');
    clock.advance(20_000 + 30_000);
    fail(l);
    assert.equal(l.lockedForMs(), 10_000, '30 s after the end: back to lockFor');
  });

  test('a success clears the failures and the growth', () => {
    const clock = clockAt();
    const l = lockout({ failures: 3, within: '1m', lockFor: '10s', factor: 2, maxLockFor: '1h', clock });
    fail(l);
    fail(l);
    fail(l);
    clock.advance(10_000);
    fail(l);
    fail(l);
    l.tryAcquire().refund(); // the right password
    fail(l);
    fail(l);
    assert.equal(fail(l).granted, true);
    assert.equal(l.lockedForMs(), 10_000, 'the count and the growth started over');
  });

  test('the Nth attempt that succeeds lifts the lockout it started; one another request started stands', () => {
    const clock = clockAt();
    const l = lockout({ failures: 2, within: '1m', lockFor: '10s', clock });
    fail(l);
    const nth = l.tryAcquire();
    assert.equal(l.lockedForMs(), 10_000);
    nth.refund();
    assert.equal(l.lockedForMs(), 0);
    assert.equal(l.tryAcquire().granted, true);

    const other = lockout({ failures: 2, within: '1m', lockFor: '10s', clock });
    const inFlight = other.tryAcquire();
    fail(other);
    assert.equal(other.lockedForMs(), 10_000);
    inFlight.refund(); // an earlier request's success arrives after another's failure locked the key
    assert.equal(other.lockedForMs(), 10_000);
    assert.equal(other.tryAcquire().reason, 'locked');
  });

  test('unlock lifts the lockout and forgets the failures and growth; the algorithm answers lockedFor', () => {
    const clock = clockAt();
    const l = lockout({ failures: 2, within: '1m', lockFor: '10s', factor: 2, maxLockFor: '1m', clock });
    fail(l);
    fail(l);
    clock.advance(10_000);
    fail(l);
    fail(l);
    assert.equal(l.lockedForMs(), 20_000);
    const a = l.algorithm;
    assert.equal(a.lockedFor(l.core.table.states, 0, clock.now()), 20_000, 'what key administration reads');
    l.unlock();
    assert.equal(l.lockedForMs(), 0);
    fail(l);
    assert.equal(l.lockedForMs(), 0, 'the failures were forgotten: one is not enough');
    fail(l);
    assert.equal(l.lockedForMs(), 10_000, 'and the growth: back to lockFor');
  });

  test('partitioned: one lockout per key, refused with the key; idle keys dropped, locked ones kept', () => {
    const clock = clockAt();
    const byUser = partitioned({
      key: (user: string) => user,
      limiter: lockout({ failures: 2, within: '1m', lockFor: '10s', factor: 2, maxLockFor: '1m', clock }),
    });
    byUser.tryAcquire('alice');
    byUser.tryAcquire('alice');
    const refused = byUser.tryAcquire('alice');
    assert.equal(refused.reason, 'locked');
    assert.equal(refused.key, 'alice');
    assert.equal(refused.retryAfterMs, 10_000);
    assert.equal(byUser.tryAcquire('bob').granted, true, 'another key is not locked');
    assert.equal(byUser.size, 2);
  });

  test('chain: all-or-nothing; a request another member refuses is no failure', () => {
    const clock = clockAt();
    const lock = lockout({ failures: 2, within: '1m', lockFor: '10s', clock });
    const ceiling = fixedWindow({ permitLimit: 1, window: '1m', clock });
    const both = chain(ceiling, lock);
    assert.equal(both.tryAcquire().granted, true);
    for (let i = 0; i < 5; i++) assert.equal(both.tryAcquire().reason, 'limit');
    assert.equal(lock.statistics().available, 1, 'refused by the ceiling: not counted as a failure');

    const roomy = fixedWindow({ permitLimit: 3, window: '1m', clock });
    const lock2 = lockout({ failures: 2, within: '1m', lockFor: '10s', clock });
    const pair = chain(roomy, lock2);
    pair.tryAcquire();
    assert.equal(pair.tryAcquire().granted, true, 'the second failure ran, and locks');
    clock.advance(1000);
    const refused = pair.tryAcquire();
    assert.equal(refused.reason, 'locked');
    assert.equal(refused.retryAfterMs, 9000);
    assert.equal(roomy.statistics().available, 1, 'the ceiling was not charged for a locked request');
  });

  test('bad options: a TypeError or RangeError naming the option and the value', () => {
    const base = { failures: 3, within: '1m', lockFor: '10s' } as const;
    assert.throws(() => lockout({ ...base, failures: 0 }), /lockout: failures .* got 0/);
    assert.throws(() => lockout({ ...base, within: '-1s' as never }), /lockout: within .* got "-1s"/);
    assert.throws(() => lockout({ ...base, lockFor: 0 }), /lockout: lockFor .* got 0/);
    assert.throws(() => lockout({ ...base, factor: 0.5, maxLockFor: '1m' }), /lockout: factor .* got 0.5/);
    assert.throws(() => lockout({ ...base, factor: 2 }), /lockout: maxLockFor is required/);
    assert.throws(() => lockout({ ...base, maxLockFor: '1s' }), /maxLockFor \("1s"\) must not be shorter/);
    assert.throws(() => lockout({ ...base, memory: 'soon' as never }), /lockout: memory .* got "soon"/);
    assert.throws(() => lockout({ ...base, blockDuration: 5 } as never), /blockDuration/);
    assert.throws(() => lockout(undefined as never), /lockout options must be an object/);
    // The types say so first (compiled, never run).
    const typed = () => {
      // @ts-expect-error within and lockFor are required
      lockout({ failures: 3 });
      // @ts-expect-error rate-limiter-flexible's name is not an option here
      lockout({ ...base, blockDuration: 5 });
      // @ts-expect-error failures is a number
      lockout({ ...base, failures: '3' });
    };
    void typed;
  });
});

/** The reference: what the lockout should say, written as plainly as possible. */
class Model {
  failures = 0;
  firstAt = 0;
  lockedUntil = Number.NEGATIVE_INFINITY;
  lockStartedBy = -1;
  streak = 0;
  constructor(
    readonly n: number,
    readonly within: number,
    readonly lockFor: number,
    readonly factor: number,
    readonly max: number,
    readonly memory: number,
  ) {}
  locked(now: number): boolean {
    return now < this.lockedUntil;
  }
  attempt(now: number, id: number): boolean {
    if (this.locked(now)) return false;
    if (this.failures > 0 && now >= this.firstAt + this.within) this.failures = 0;
    if (this.failures === 0) this.firstAt = now;
    this.failures++;
    if (this.failures === this.n) {
      const remembered = this.streak > 0 && now < this.lockedUntil + this.memory;
      this.streak = remembered ? this.streak + 1 : 1;
      this.lockedUntil = now + Math.min(this.lockFor * this.factor ** (this.streak - 1), this.max);
      this.lockStartedBy = id;
      this.failures = 0;
    }
    return true;
  }
  success(now: number, id: number): void {
    this.failures = 0;
    this.streak = 0;
    if (this.lockStartedBy === id && this.locked(now)) this.lockedUntil = now;
  }
}

type Step =
  | { op: 'attempt' }
  | { op: 'success'; pick: number }
  | { op: 'tick'; dt: number }
  // To the instant the window, the lockout or the memory period ends, where off-by-one errors live.
  | { op: 'edge'; which: 0 | 1 | 2 };

test('property: for any attempts, successes and time steps, the lock state matches the reference model', () => {
  fc.assert(
    fc.property(
      fc.record({
        n: fc.integer({ min: 1, max: 5 }),
        // Multiples of 10, as the time steps, so that steps land on window and lockout ends exactly.
        within: fc.integer({ min: 1, max: 10 }).map((x) => x * 10),
        lockFor: fc.integer({ min: 1, max: 5 }).map((x) => x * 10),
        factor: fc.constantFrom(1, 1.5, 2, 3),
        extra: fc.integer({ min: 0, max: 50 }).map((x) => x * 10),
        memory: fc.integer({ min: 0, max: 8 }).map((x) => x * 10),
      }),
      fc.array(
        fc.oneof(
          { weight: 4, arbitrary: fc.constant({ op: 'attempt' } as Step) },
          { weight: 2, arbitrary: fc.record({ op: fc.constant('success' as const), pick: fc.nat() }) },
          {
            weight: 1,
            arbitrary: fc.record({
              op: fc.constant('edge' as const),
              which: fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>,
            }),
          },
          {
            weight: 3,
            arbitrary: fc.record({
              op: fc.constant('tick' as const),
              dt: fc.oneof(
                fc.integer({ min: 0, max: 15 }).map((x) => x * 10),
                fc.integer({ min: 0, max: 150 }),
              ),
            }),
          },
        ),
        { maxLength: 200 },
      ),
      (p, steps) => {
        const clock = clockAt(0);
        const max = p.lockFor + p.extra;
        const l = lockout({
          failures: p.n,
          within: p.within,
          lockFor: p.lockFor,
          factor: p.factor,
          maxLockFor: max,
          memory: p.memory,
          clock,
        });
        const model = new Model(p.n, p.within, p.lockFor, p.factor, max, p.memory);
        const open: { lease: Lease; id: number }[] = [];
        let id = 0;
        for (const step of steps) {
          const now = clock.now();
          if (step.op === 'tick') clock.advance(step.dt);
          else if (step.op === 'edge') {
            const ends = [model.firstAt + model.within, model.lockedUntil, model.lockedUntil + model.memory];
            const target = ends[step.which];
            if (Number.isFinite(target) && target > now) clock.advance(target - now);
          } else if (step.op === 'attempt') {
            const lease = l.tryAcquire();
            const expected = model.attempt(now, ++id);
            assert.equal(lease.granted, expected, `attempt ${id} at ${now}`);
            if (lease.granted) open.push({ lease, id });
            else {
              assert.equal(lease.reason, 'locked');
              // Rounded up to a whole millisecond, as every retry time is (a factor of 1.5 makes fractions).
              assert.equal(lease.retryAfterMs, Math.ceil(model.lockedUntil - now));
            }
          } else if (open.length > 0) {
            const [{ lease, id: which }] = open.splice(step.pick % open.length, 1);
            lease.refund();
            model.success(now, which);
          }
          const t = clock.now();
          assert.equal(l.lockedForMs(), model.locked(t) ? model.lockedUntil - t : 0, `locked for, at ${t}`);
        }
      },
    ),
    { numRuns: RUNS },
  );
});
