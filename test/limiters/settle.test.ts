import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  chain,
  concurrency,
  fixedWindow,
  type Lease,
  partitioned,
  slidingWindow,
  tokenBucket,
} from '../../src/index.ts';
import { flush, manualClock, track } from '../support/clock.ts';

function frozen(start = 0) {
  let t = start;
  return {
    now: () => t,
    set(value: number) {
      t = value;
    },
  };
}

describe('lease.settle(actual): reserve an estimate, settle the real cost', () => {
  test('token bucket: a higher cost is charged (below zero if need be), a lower one given back', () => {
    const clock = frozen();
    const bucket = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, clock, unit: 'tokens' });
    const low = bucket.tryAcquire(30);
    low.settle(10);
    assert.equal(bucket.statistics().available, 90, '20 of the 30 reserved came back');
    const high = bucket.tryAcquire(80);
    assert.equal(high.granted, true);
    high.settle(130);
    // 40 in debt (statistics never say less than 0): the overdraw is recorded.
    assert.equal(bucket.statistics().available, 0);
    assert.equal(bucket.tryAcquire(1).retryAfterMs, 5000, 'the debt of 40 and one token: 5 refills of 10');
    assert.equal(bucket.tryAcquire(1).granted, false);
    // The debt is paid from the refill: 4 periods bring it to 0, the fifth to 10.
    clock.set(4000);
    assert.equal(bucket.tryAcquire(1).granted, false);
    clock.set(5000);
    assert.equal(bucket.statistics().available, 10);
    assert.equal(bucket.tryAcquire(10).granted, true);
  });

  test('a lease never settled keeps its estimate; a settle at the estimate changes nothing', () => {
    const clock = frozen();
    const bucket = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, clock });
    bucket.tryAcquire(30);
    bucket.tryAcquire(20).settle(20);
    assert.equal(bucket.statistics().available, 50);
  });

  test('fixed window: a count over the limit is debt carried into the next windows', () => {
    const clock = frozen();
    const window = fixedWindow({ permitLimit: 100, window: 1000, clock, unit: 'tokens' });
    const lease = window.tryAcquire(90);
    lease.settle(250);
    assert.equal(window.statistics().available, 0);
    assert.deepEqual(window.tryAcquire(1).retryAfterMs, 2000, 'two window ends pay the 150 over the limit');
    clock.set(1000); // 150 over the limit carried: this window starts at 150 of 100
    assert.equal(window.tryAcquire(1).granted, false);
    clock.set(2000); // 50 carried
    assert.equal(window.statistics().available, 50);
    assert.equal(window.tryAcquire(50).granted, true);
    assert.equal(window.tryAcquire(1).granted, false);
    clock.set(3000);
    assert.equal(window.statistics().available, 100);
  });

  test('fixed window: a give-back after the window ended changes nothing; a charge goes to the window now', () => {
    const clock = frozen();
    const window = fixedWindow({ permitLimit: 100, window: 1000, clock });
    const a = window.tryAcquire(60);
    const b = window.tryAcquire(40);
    clock.set(1500);
    a.settle(0);
    assert.equal(window.statistics().available, 100, 'a later window owes nothing to an earlier one');
    b.settle(70);
    assert.equal(window.statistics().available, 70, 'the 30 more is charged to the window of the settle');
  });

  test('fixed window with countRejected: penalties end with the window (no carry)', () => {
    const clock = frozen();
    const window = fixedWindow({ permitLimit: 2, window: 1000, clock, countRejected: true });
    window.tryAcquire(2);
    for (let i = 0; i < 10; i++) window.tryAcquire(1);
    clock.set(1000);
    assert.equal(window.statistics().available, 2);
  });

  test('sliding window: a charge counts for a whole window from the settle; a give-back goes to the segment of the grant', () => {
    const clock = frozen();
    const limiter = slidingWindow({ permitLimit: 100, window: 1000, segmentsPerWindow: 4, clock });
    const early = limiter.tryAcquire(50); // segment [0, 250)
    clock.set(600); // segment [500, 750)
    const late = limiter.tryAcquire(40);
    early.settle(20); // 30 back into the first segment
    assert.equal(limiter.statistics().available, 100 - 20 - 40);
    late.settle(90); // 50 more, charged in the current segment
    assert.equal(limiter.statistics().available, 0, '10 over the limit');
    clock.set(1000); // the first segment (20) left the window
    assert.equal(limiter.statistics().available, 10);
    clock.set(1500); // the second segment's 90 still counts until 1500 (the segment at 500 leaves at 1500)
    assert.equal(limiter.statistics().available, 100);
  });

  test('bad costs: a TypeError or RangeError naming settle and the value, and nothing changes', () => {
    const clock = frozen();
    const bucket = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 1000, clock });
    const lease = bucket.tryAcquire(5);
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, 1.5]) {
      assert.throws(() => lease.settle(bad), {
        name: 'RangeError',
        message: new RegExp(`lease\\.settle\\(actual\\): actual must be a whole number ≥ 0.*got ${bad}`),
      });
    }
    assert.throws(() => lease.settle('3' as unknown as number), { name: 'TypeError', message: /got "3"/ });
    assert.equal(bucket.statistics().available, 5);
    lease.settle(2);
    assert.equal(bucket.statistics().available, 8);
  });

  test('settling twice, after refund(), a rejected lease, a probe or a concurrency lease is an error naming why', () => {
    const clock = frozen();
    const bucket = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 1000, clock });
    const once = bucket.tryAcquire(5);
    once.settle(3);
    assert.throws(() => once.settle(3), /settled already/);
    once.refund(); // a settled cost stands
    assert.equal(bucket.statistics().available, 7);
    const refunded = bucket.tryAcquire(2);
    refunded.refund();
    assert.throws(() => refunded.settle(1), /was refunded/);
    const rejected = bucket.tryAcquire(10);
    assert.equal(rejected.granted, false);
    assert.throws(() => rejected.settle(1), /rejected \("limit"\) and reserved nothing/);
    assert.throws(() => bucket.tryAcquire(0).settle(1), { name: 'TypeError', message: /reserved nothing/ });
    assert.throws(() => concurrency({ permitLimit: 1 }).tryAcquire().settle(1), {
      name: 'TypeError',
      message: /concurrency lease holds permits/,
    });
    assert.equal(bucket.statistics().available, 7);
  });

  test('an estimate larger than the limit is a RangeError naming the limit', () => {
    const bucket = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, unit: 'tokens' });
    assert.throws(() => bucket.tryAcquire(101), {
      name: 'RangeError',
      message: /the limit \(100\); got 101/,
    });
  });

  test('unit: a word, or a TypeError; a concurrency limiter takes none', () => {
    assert.equal(tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: 1 }).unit, 'requests');
    assert.equal(fixedWindow({ permitLimit: 1, window: 1, unit: 'input-tokens' }).unit, 'input-tokens');
    for (const bad of ['', 'two words', 7, '"q"']) {
      assert.throws(() => fixedWindow({ permitLimit: 1, window: 1, unit: bad as string }), {
        name: 'TypeError',
        message: /fixedWindow: unit must be a word/,
      });
    }
    assert.throws(() => concurrency({ permitLimit: 1, unit: 'tokens' } as never), /unit/);
  });
});

describe('chains: each member counts what it says', () => {
  test('a requests member takes one per request and is never settled; cost members settle, all or nothing', () => {
    const clock = frozen();
    const tpm = tokenBucket({ tokenLimit: 1000, tokensPerPeriod: 100, period: 1000, clock, unit: 'tokens' });
    const tpd = fixedWindow({ permitLimit: 5000, window: 86_400_000, clock, unit: 'tokens' });
    const rpm = fixedWindow({ permitLimit: 3, window: 60_000, clock });
    const limits = chain(tpm, rpm, tpd);
    const lease = limits.tryAcquire(400);
    assert.equal(lease.granted, true);
    assert.deepEqual(
      [tpm, rpm, tpd].map((l) => l.statistics().available),
      [600, 2, 4600],
    );
    lease.settle(700);
    assert.deepEqual(
      [tpm, rpm, tpd].map((l) => l.statistics().available),
      [300, 2, 4300],
    );
    assert.throws(() => lease.settle(1), /settled already/);
    assert.deepEqual(
      [tpm, rpm, tpd].map((l) => l.statistics().available),
      [300, 2, 4300],
    );
    // The requests member says no while tokens are left: nothing is charged anywhere.
    limits.tryAcquire(10);
    limits.tryAcquire(10);
    const refused = limits.tryAcquire(10);
    assert.equal(refused.granted, false);
    assert.equal(refused.source, rpm);
    assert.throws(() => refused.settle(5), /rejected/);
    assert.deepEqual(
      [tpm, rpm, tpd].map((l) => l.statistics().available),
      [280, 0, 4280],
    );
  });

  test('a member lease that cannot settle stops the whole settle before anything is charged', () => {
    const clock = frozen();
    const tokens = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, clock, unit: 'tokens' });
    const bytes = tokenBucket({ tokenLimit: 100, tokensPerPeriod: 10, period: 1000, clock, unit: 'bytes' });
    const lease = chain(tokens, bytes).tryAcquire(10);
    lease.members![1].settle(10);
    assert.throws(() => lease.settle(50), /settled already/);
    assert.equal(tokens.statistics().available, 90, 'the first member was not charged');
  });

  test('a chain of requests members settles every member (each took the permits asked)', () => {
    const clock = frozen();
    const a = fixedWindow({ permitLimit: 10, window: 1000, clock });
    const b = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 1000, clock });
    chain(a, b).tryAcquire(4).settle(1);
    assert.deepEqual([a.statistics().available, b.statistics().available], [9, 9]);
    assert.throws(
      () =>
        chain(a, concurrency({ permitLimit: 2 }))
          .tryAcquire(1)
          .settle(1),
      /concurrency lease/,
    );
  });

  test('a chain waiter queued on a requests member waits for one permit there', async () => {
    const clock = manualClock();
    const tokens = tokenBucket({
      tokenLimit: 1000,
      tokensPerPeriod: 100,
      period: 1000,
      clock,
      unit: 'tokens',
    });
    const requests = fixedWindow({ permitLimit: 1, window: 1000, clock, queueLimit: 1 });
    const limits = chain(tokens, requests);
    limits.tryAcquire(100);
    const waiting = track(limits.acquire(500));
    await flush();
    assert.equal(waiting.settled, false);
    assert.equal(requests.statistics().queued, 1, 'one request waits, not 500');
    clock.advance(1000);
    await flush();
    assert.equal(waiting.value?.granted, true);
    assert.equal(tokens.statistics().available, 1000 - 100 - 500 + 100);
  });

  test('partitioned: the partition a lease came from settles; a dropped partition is charged anew', () => {
    const clock = frozen();
    const perUser = partitioned({
      key: (user: string) => user,
      limiter: tokenBucket({ tokenLimit: 10, tokensPerPeriod: 10, period: 1000, clock, unit: 'tokens' }),
      maxPartitions: 2,
    });
    assert.equal(perUser.unit, 'tokens');
    const tiers = partitioned({ key: (user: string) => user, limiter: () => perUser.spec! });
    assert.equal(tiers.unit, 'requests', 'a limiter chosen per key counts requests');
    const a = perUser.tryAcquire('a', 1);
    perUser.tryAcquire('b', 1);
    clock.set(1000); // both full again: droppable
    perUser.tryAcquire('c', 1); // full of partitions: the sweep drops a and b
    a.settle(5);
    assert.equal(perUser.statistics('a').available, 6, "the 4 more is charged to a's partition now");
    assert.equal(perUser.statistics('c').available, 9, 'not to the partition that took its slot');
  });
});

describe('queues: a large reservation is not starved', () => {
  test('oldest-first: smaller requests do not overtake a large waiter; it is admitted once the refill covers it', async () => {
    const clock = manualClock();
    // 1000 tokens a second, refilled 100 each 100 ms.
    const bucket = tokenBucket({
      tokenLimit: 1000,
      tokensPerPeriod: 100,
      period: 100,
      clock,
      queueLimit: 2000,
      unit: 'tokens',
    });
    bucket.tryAcquire(900);
    const large = track(bucket.acquire(400));
    const small: ReturnType<typeof track<Lease>>[] = [];
    for (let i = 0; i < 10; i++) {
      small.push(track(bucket.acquire(10)));
      assert.equal(
        bucket.tryAcquire(10).granted,
        false,
        'a new small request does not pass the large waiter',
      );
    }
    // The bound: (permits queued ahead + its own − tokens now) / rate = (0 + 400 − 100) / (100 per 100 ms).
    clock.advance(200);
    await flush();
    assert.equal(large.settled, false);
    clock.advance(100);
    await flush();
    assert.equal(large.value?.granted, true);
    assert.equal(
      small.some((s) => s.settled),
      false,
    );
  });
});

test('types: a cost is a number, a unit a string', () => {
  const check = (lease: Lease) => {
    // @ts-expect-error a cost is a number
    lease.settle('3');
    // @ts-expect-error a unit is a string
    fixedWindow({ permitLimit: 1, window: 1, unit: 3 });
  };
  assert.equal(typeof check, 'function');
});
