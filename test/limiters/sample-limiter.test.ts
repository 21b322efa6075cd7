import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { chain, fixedWindow, tokenBucket } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';
import { TotalQuota } from './sample-limiter.ts';

const byName = (name: string) => name;

describe('a limiter written against the public contract', () => {
  test('decides alone: its quota per key, then no; its leases name it and the key', () => {
    const quota = new TotalQuota({ quota: 2, key: byName });
    const answers = [
      quota.tryAcquire('a'),
      quota.tryAcquire('a'),
      quota.tryAcquire('a'),
      quota.tryAcquire('b'),
    ];
    assert.deepEqual(
      answers.map((l) => [l.granted, l.remaining, l.key]),
      [
        [true, 1, 'a'],
        [true, 0, 'a'],
        [false, 0, 'a'],
        [true, 1, 'b'],
      ],
    );
    assert.equal(answers[2].reason, 'limit');
    assert.equal(answers[2].source, quota);
  });

  test('checks permits in the base: a bad count throws from tryAcquireFor, rejects from acquireFor', async () => {
    const quota = new TotalQuota({ quota: 2, key: byName });
    assert.throws(() => quota.tryAcquireFor('a', 3), RangeError);
    await assert.rejects(quota.acquireFor('a', -1), RangeError);
    const lease = await quota.acquireFor('a', 2);
    assert.equal(lease.granted, true);
    assert.equal((await quota.acquireFor('a', 1)).granted, false, 'it cannot queue: rejected at once');
  });

  test('in a chain, all or nothing: the quota is not spent when another member says no, nor the other when it does', () => {
    const clock = manualClock();
    const window = fixedWindow({ permitLimit: 3, window: '1m', clock });
    const quota = new TotalQuota({ quota: 2, key: byName });
    const both = chain(window, quota);
    assert.deepEqual(
      [both.tryAcquire('a'), both.tryAcquire('a'), both.tryAcquire('a')].map((l) => l.granted),
      [true, true, false],
    );
    // The third was refused by the quota: the window was not charged for it.
    assert.equal(window.statistics().available, 1);
    assert.equal(both.statistics('a').available, 0, "the chain's least: a's quota is spent");
    assert.equal(both.tryAcquire('b').granted, true, 'b has its own quota');
    assert.equal(window.statistics().available, 0);
    const refused = both.tryAcquire('c');
    assert.equal(refused.granted, false);
    assert.equal(refused.source, window, 'the window said no');
    assert.equal(quota.available('c'), 2, 'c spent nothing of its quota');
    clock.advance(60_000);
    const granted = both.tryAcquire('c');
    assert.equal(granted.granted, true);
    assert.deepEqual(
      granted.members?.map((l) => [l.source === window ? 'window' : 'quota', l.remaining, l.key]),
      [
        ['window', 2, undefined],
        ['quota', 1, 'c'],
      ],
    );
  });

  test('in a chain inside a chain: flattened into one all-or-nothing decision', () => {
    const quota = new TotalQuota({ quota: 1, key: byName });
    const bucket = tokenBucket({ tokenLimit: 5, tokensPerPeriod: 1, period: '1h', clock: manualClock() });
    const outer = chain(
      chain(bucket, quota),
      fixedWindow({ permitLimit: 5, window: '1h', clock: manualClock() }),
    );
    assert.equal(outer.members.length, 3);
    assert.equal(outer.tryAcquire('a').granted, true);
    assert.equal(outer.tryAcquire('a').granted, false);
    assert.equal(bucket.statistics().available, 4, 'the refused request took no token');
  });
});
