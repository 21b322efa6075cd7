import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RateLimitedError, rateLimitedFetch } from '../../src/fetch/index.ts';
import {
  parseProviderDuration,
  parseRfc3339,
  providerQuotas,
  providerWaitMs,
  resetPrecisionMs,
  retryAfterMsField,
} from '../../src/fetch/provider-headers.ts';
import { tokenBucket } from '../../src/index.ts';
import { chargeOf, type Provider, startProvider } from './llm-provider.ts';

const from = (fields: Record<string, string>) => (name: string) => fields[name];

describe('provider fields', () => {
  test('durations as OpenAI sends them, strictly', () => {
    const cases: [string, number | undefined][] = [
      ['6m0s', 360_000],
      ['1.5s', 1500],
      ['20ms', 20],
      ['1h2m3s', 3_723_000],
      ['0s', 0],
      ['59.1s', 59_100],
      ['1m30s500ms', 90_500],
      ['', undefined],
      ['6m0', undefined],
      ['s', undefined],
      ['-1s', undefined],
      ['1.5', undefined],
      ['1d', undefined],
      ['ms', undefined],
      ['2s1m', undefined],
    ];
    for (const [text, ms] of cases) assert.equal(parseProviderDuration(text), ms, text);
  });

  test("a reset's precision: the unit of its last digit", () => {
    const cases: [string, boolean, number][] = [
      ['6m0s', false, 1000],
      ['1.5s', false, 100],
      ['1m0.234s', false, 1],
      ['20ms', false, 1],
      ['1.5ms', false, 1],
      ['1h', false, 3_600_000],
      ['soon', false, 0],
      ['2026-12-06T02:15:30Z', true, 1000],
      ['2026-12-06T02:15:30.25Z', true, 10],
      ['2026-12-06T02:15:30.250123Z', true, 1],
      ['yesterday', true, 0],
    ];
    for (const [text, rfc3339, ms] of cases) assert.equal(resetPrecisionMs(text, rfc3339), ms, text);
  });

  test('RFC 3339 times as Anthropic sends them, strictly', () => {
    const base = Date.UTC(2026, 11, 6, 2, 15, 30);
    assert.equal(parseRfc3339('2026-12-06T02:15:30Z'), base);
    assert.equal(parseRfc3339('2026-12-06T02:15:30.250Z'), base + 250);
    assert.equal(parseRfc3339('2026-12-06T03:15:30+01:00'), base);
    assert.equal(parseRfc3339('2026-12-06T01:45:30-00:30'), base);
    for (const bad of [
      '2026-02-30T00:00:00Z',
      'yesterday',
      '2026-12-06',
      '2026-12-06T02:15:30',
      '1733451330',
    ]) {
      assert.equal(parseRfc3339(bad), undefined, bad);
    }
  });

  test('retry-after-ms: a non-negative number of milliseconds', () => {
    assert.equal(retryAfterMsField('1500'), 1500);
    assert.equal(retryAfterMsField('20.5'), 20.5);
    for (const bad of ['-1', 'soon', '', undefined, '1e3']) assert.equal(retryAfterMsField(bad), undefined);
  });

  test('quotas of both providers, per unit; the wait is the longest reset among exhausted units', () => {
    const now = Date.UTC(2026, 11, 6, 2, 0, 0);
    const openai = from({
      'x-ratelimit-limit-requests': '500',
      'x-ratelimit-remaining-requests': '499',
      'x-ratelimit-reset-requests': '120ms',
      'x-ratelimit-limit-tokens': '30000',
      'x-ratelimit-remaining-tokens': '0',
      'x-ratelimit-reset-tokens': '6m0s',
    });
    assert.deepEqual(providerQuotas(openai, now), [
      { provider: 'openai', unit: 'requests', limit: 500, remaining: 499, resetMs: 120, resetPrecisionMs: 1 },
      {
        provider: 'openai',
        unit: 'tokens',
        limit: 30_000,
        remaining: 0,
        resetMs: 360_000,
        resetPrecisionMs: 1000,
      },
    ]);
    assert.equal(providerWaitMs(openai, now), 360_000);
    const anthropic = from({
      'anthropic-ratelimit-requests-remaining': '0',
      'anthropic-ratelimit-requests-reset': '2026-12-06T02:00:10Z',
      'anthropic-ratelimit-input-tokens-limit': '40000',
      'anthropic-ratelimit-input-tokens-remaining': '0',
      'anthropic-ratelimit-input-tokens-reset': '2026-12-06T02:00:45Z',
      'anthropic-ratelimit-output-tokens-remaining': '-1',
    });
    assert.deepEqual(
      providerQuotas(anthropic, now).map((q) => [q.unit, q.limit, q.remaining, q.resetMs]),
      [
        ['requests', undefined, 0, 10_000],
        ['input-tokens', 40_000, 0, 45_000],
      ],
    );
    assert.equal(providerWaitMs(anthropic, now), 45_000);
    // Measured against the response's Date when it has one: a skewed local clock does not matter.
    assert.equal(providerWaitMs(anthropic, now + 3_600_000, now + 5_000), 40_000);
    assert.equal(providerWaitMs(from({ 'x-ratelimit-remaining-tokens': '0' }), now), undefined);
  });
});

describe('rateLimitedFetch against an imitation provider with its own limits', () => {
  let provider: Provider;
  before(async () => {
    provider = await startProvider();
  });
  after(() => provider.close());

  const client = () =>
    rateLimitedFetch({
      limiter: tokenBucket({ tokenLimit: 10_000, tokensPerPeriod: 10_000, period: '1s' }),
      cost: { estimate: chargeOf },
      onLimited: 'throw',
      pause: { jitter: 0 },
      retry: 2,
    });

  for (const vendor of ['openai', 'anthropic']) {
    test(`${vendor}: an answer that leaves a unit with nothing holds the next call until the unit has room for it, not until it is full`, async () => {
      // 1000 tokens a minute, refilled continuously: one token every 60 ms.
      provider.limit({ requests: 100, tokens: 1000, windowMs: 60_000 });
      const api = client();
      const before = provider.hits.length;
      assert.equal((await api(provider.url(`/${vendor}/json/600/0`))).status, 200);
      assert.equal((await api(provider.url(`/${vendor}/json/400/0`))).status, 200);
      assert.equal(api.pausedFor(provider.origin), 0, 'a 200 pauses nothing');
      const held = await api(provider.url(`/${vendor}/json/300/0`)).then(
        () => assert.fail('the next call should be held'),
        (e: unknown) => e,
      );
      assert.ok(held instanceof RateLimitedError && held.reason === 'paused', String(held));
      // The refill rate learned from the fields: 999 tokens in the reset (60 s, give or take its precision).
      const wait = held.retryAfterMs ?? 0;
      assert.ok(
        wait > 17_000 && wait < 19_000,
        `held for ${wait} ms: 300 tokens' refill, not 60 s until full`,
      );
      assert.equal(provider.hits.length - before, 2, 'the answer that emptied the tokens was not retried');
      const waiting = rateLimitedFetch({
        limiter: tokenBucket({ tokenLimit: 10_000, tokensPerPeriod: 10_000, period: '1s' }),
        cost: { estimate: chargeOf },
        pause: { jitter: 0 },
      });
      // A client that knows nothing yet is refused once, and learns from that answer's fields.
      const sent = provider.hits.length;
      assert.equal((await waiting(provider.url(`/${vendor}/json/5/0`))).status, 429);
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await waiting(provider.url(`/${vendor}/json/5/0`))).status);
      assert.deepEqual(statuses, [200, 200, 200], 'each waited for its tokens, then was let through');
      assert.equal(provider.hits.length - sent, 4, 'nothing was refused after the first answer');
    });
  }

  test('a 429 pauses for retry-after-ms before Retry-After', async () => {
    provider.limit({ requests: 10, tokens: 100, windowMs: 1500 });
    const api = rateLimitedFetch({
      limiter: tokenBucket({ tokenLimit: 10, tokensPerPeriod: 10, period: '1s' }),
      pause: { jitter: 0 },
    });
    // More tokens than the provider allows in a window: refused, with 100 tokens still left.
    const refused = await api(provider.url('/openai/json/200/0'));
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('retry-after'), '2');
    const paused = api.pausedFor(provider.origin);
    assert.ok(
      paused > 1000 && paused <= 1500,
      `paused for ${paused} ms: retry-after-ms, not Retry-After's 2 s`,
    );
    provider.limit(undefined);
  });
});
