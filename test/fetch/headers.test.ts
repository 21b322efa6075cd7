import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseHttpDate, parseRateLimit, rateLimitWaitMs, retryAfterMs } from '../../src/fetch/index.ts';

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);

describe('Retry-After', () => {
  test('delay-seconds', () => {
    assert.equal(retryAfterMs('120', NOW), 120_000);
    assert.equal(retryAfterMs(' 0 ', NOW), 0);
  });

  test('an HTTP-date in its three forms, measured against now', () => {
    assert.equal(retryAfterMs('Sun, 29 Nov 2026 12:00:30 GMT', NOW), 30_000);
    assert.equal(retryAfterMs('Sunday, 29-Nov-26 12:00:30 GMT', NOW), 30_000);
    assert.equal(retryAfterMs('Sun Nov 29 12:00:30 2026', NOW), 30_000);
    assert.equal(
      retryAfterMs('Sun, 29 Nov 2026 11:00:00 GMT', NOW),
      0,
      'a date in the past asks for no wait',
    );
  });

  test("an HTTP-date is measured against the response's Date when it has one", () => {
    const skewed = NOW + 3_600_000;
    assert.equal(
      retryAfterMs('Sun, 29 Nov 2026 12:00:10 GMT', skewed, 'Sun, 29 Nov 2026 12:00:00 GMT'),
      10_000,
    );
  });

  test('malformed values are ignored', () => {
    for (const value of [
      '1.5',
      '-3',
      '+3',
      'soon',
      '',
      '1 2',
      '0x10',
      '1e3',
      'Sun, 31 Feb 2026 12:00:00 GMT',
    ]) {
      assert.equal(retryAfterMs(value, NOW), undefined, value);
    }
    assert.equal(retryAfterMs(null, NOW), undefined);
    assert.equal(parseHttpDate('Sun, 29 Nov 2026 25:00:00 GMT'), undefined);
    assert.equal(parseHttpDate('2026-11-29T12:00:00Z'), undefined, 'ISO 8601 is not an HTTP-date');
  });
});

describe('RateLimit (draft-10)', () => {
  test('items with r and t', () => {
    assert.deepEqual(parseRateLimit('"api";r=0;t=30, "burst";r=5;t=1'), [
      { policy: 'api', remaining: 0, resetSeconds: 30 },
      { policy: 'burst', remaining: 5, resetSeconds: 1 },
    ]);
    assert.deepEqual(parseRateLimit('day;r=1;t=3600;pk=:YWJj:;x="y"'), [
      { policy: 'day', remaining: 1, resetSeconds: 3600 },
    ]);
  });

  test('the wait is the longest t among exhausted policies', () => {
    assert.equal(rateLimitWaitMs('"api";r=0;t=30, "day";r=0;t=90, "burst";r=3;t=500'), 90_000);
    assert.equal(rateLimitWaitMs('"api";r=2;t=30'), undefined, 'quota left: no wait');
    assert.equal(rateLimitWaitMs('"api";r=0'), undefined, 'no reset time: no wait');
  });

  test('a field that fails to parse is ignored in full', () => {
    for (const value of [
      '"api";r=0;t=abc',
      '"api";r=0;t=30.0',
      '"api";r=0;t=-5',
      '"api";r=0;t=30,',
      '"api;r=0;t=30',
      '"api";r=0;t=30 "x"',
      'api;r=0;T=30',
      '',
    ]) {
      assert.equal(parseRateLimit(value), undefined, value);
      assert.equal(rateLimitWaitMs(value), undefined, value);
    }
  });
});
