import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readRateLimit } from '../../src/cli/dialects.ts';
import { type PolicyState, partitionKeyHasher, rateLimitHeaders } from '../../src/http/ratelimit-headers.ts';

const NOW = 1_700_000_000_000;
const api: PolicyState = { name: 'api', limit: 100, windowMs: 60_000, remaining: 50, resetAfterMs: 30_000 };
const hasher = partitionKeyHasher({ secret: 'a test secret, not random' });

/** The fields floodgate itself writes in `style`, as node:http hands them to a client (lower-case names). */
function written(style: 'draft-10' | 'draft-7' | 'draft-6' | 'legacy', states = [api]) {
  return Object.fromEntries(
    rateLimitHeaders(states, [style], { now: NOW, partitionKeys: hasher }).map(([n, v]) => [
      n.toLowerCase(),
      v,
    ]),
  );
}

describe('readRateLimit()', () => {
  test('openai and anthropic: every unit, its reset a duration or an RFC 3339 time; retry-after-ms wins', () => {
    const date = new Date(NOW).toUTCString();
    assert.deepEqual(
      readRateLimit(
        {
          'x-ratelimit-limit-requests': '500',
          'x-ratelimit-remaining-requests': '499',
          'x-ratelimit-reset-requests': '120ms',
          'x-ratelimit-limit-tokens': '30000',
          'x-ratelimit-remaining-tokens': '29000',
          'x-ratelimit-reset-tokens': '6m0s',
          'retry-after': '2',
          'retry-after-ms': '1500',
        },
        NOW,
      ),
      {
        quotas: [
          { dialect: 'openai', policy: 'requests', limit: 500, remaining: 499, resetMs: 120 },
          { dialect: 'openai', policy: 'tokens', limit: 30_000, remaining: 29_000, resetMs: 360_000 },
        ],
        retryAfterMs: 1500,
      },
    );
    assert.deepEqual(
      readRateLimit(
        {
          date,
          'anthropic-ratelimit-output-tokens-limit': '8000',
          'anthropic-ratelimit-output-tokens-remaining': '0',
          'anthropic-ratelimit-output-tokens-reset': new Date(NOW + 20_000).toISOString(),
        },
        NOW + 999_000,
      ).quotas,
      [{ dialect: 'anthropic', policy: 'output-tokens', limit: 8000, remaining: 0, resetMs: 20_000 }],
    );
  });

  test('draft-10: every policy of RateLimit, joined with its RateLimit-Policy item by name', () => {
    const daily = { ...api, name: 'daily', limit: 1000, windowMs: 86_400_000, remaining: 0 };
    assert.deepEqual(readRateLimit(written('draft-10', [api, daily]), NOW).quotas, [
      { dialect: 'draft-10', policy: 'api', limit: 100, remaining: 50, resetMs: 30_000, windowMs: 60_000 },
      {
        dialect: 'draft-10',
        policy: 'daily',
        limit: 1000,
        remaining: 0,
        resetMs: 30_000,
        windowMs: 86_400_000,
      },
    ]);
  });

  test("draft-8 as express-rate-limit writes it (spaces after ';', a pk)", () => {
    const reading = readRateLimit(
      {
        'ratelimit-policy': '"100-in-1min"; q=100; w=60; pk=:ZjFkNTY0OTJiNGMx:',
        ratelimit: '"100-in-1min"; r=99; t=60',
      },
      NOW,
    );
    assert.deepEqual(reading.quotas, [
      {
        dialect: 'draft-10',
        policy: '100-in-1min',
        limit: 100,
        remaining: 99,
        resetMs: 60_000,
        windowMs: 60_000,
      },
    ]);
  });

  test('draft-7: the RateLimit dictionary and the window of RateLimit-Policy', () => {
    assert.deepEqual(readRateLimit(written('draft-7'), NOW).quotas, [
      { dialect: 'draft-7', limit: 100, remaining: 50, resetMs: 30_000, windowMs: 60_000 },
    ]);
  });

  test('draft-6: RateLimit-Limit, -Remaining, -Reset in seconds', () => {
    assert.deepEqual(readRateLimit(written('draft-6'), NOW).quotas, [
      { dialect: 'draft-6', limit: 100, remaining: 50, resetMs: 30_000, windowMs: 60_000 },
    ]);
    assert.deepEqual(
      readRateLimit({ 'ratelimit-limit': '5', 'ratelimit-remaining': '0', 'ratelimit-reset': '7' }, NOW)
        .quotas,
      [{ dialect: 'draft-6', limit: 5, remaining: 0, resetMs: 7_000 }],
    );
  });

  test('X-RateLimit-Reset in Unix seconds (as floodgate and GitHub write it), measured from the Date field', () => {
    assert.deepEqual(readRateLimit(written('legacy'), NOW).quotas, [
      { dialect: 'x-ratelimit', limit: 100, remaining: 50, resetMs: 30_000 },
    ]);
    const date = new Date(NOW).toUTCString();
    // The local clock is an hour off; the response's own Date is what the reset is measured from.
    const reading = readRateLimit(
      {
        date,
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '59',
        'x-ratelimit-reset': String(NOW / 1000 + 45),
      },
      NOW + 3_600_000,
    );
    assert.deepEqual(reading.quotas, [{ dialect: 'x-ratelimit', limit: 60, remaining: 59, resetMs: 45_000 }]);
  });

  test('X-RateLimit-Reset in seconds from now, and in Unix milliseconds; X-Rate-Limit-* too', () => {
    assert.equal(readRateLimit({ 'x-ratelimit-reset': '12' }, NOW).quotas[0].resetMs, 12_000);
    assert.equal(readRateLimit({ 'x-ratelimit-reset': String(NOW + 2_500) }, NOW).quotas[0].resetMs, 2_500);
    assert.deepEqual(readRateLimit({ 'x-rate-limit-remaining': '3' }, NOW).quotas, [
      { dialect: 'x-ratelimit', remaining: 3 },
    ]);
  });

  test('Retry-After in seconds and as an HTTP-date', () => {
    assert.equal(readRateLimit({ 'retry-after': '30' }, NOW).retryAfterMs, 30_000);
    const at = new Date(NOW + 90_000).toUTCString();
    assert.equal(readRateLimit({ 'retry-after': at }, NOW).retryAfterMs, 90_000);
    assert.equal(readRateLimit({ 'retry-after': 'soon' }, NOW).retryAfterMs, undefined);
  });

  test('several dialects in one response are all read; none gives no quotas', () => {
    const both = { ...written('draft-10'), ...written('legacy') };
    assert.deepEqual(
      readRateLimit(both, NOW).quotas.map((q) => q.dialect),
      ['draft-10', 'x-ratelimit'],
    );
    assert.deepEqual(readRateLimit({ 'content-type': 'text/plain' }, NOW), { quotas: [] });
  });

  test('garbage is ignored, never guessed at', () => {
    assert.deepEqual(readRateLimit({ ratelimit: '"api";r=-1', 'x-ratelimit-remaining': 'lots' }, NOW), {
      quotas: [],
    });
  });
});
