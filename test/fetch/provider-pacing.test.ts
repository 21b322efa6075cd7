import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { llmUsage, rateLimitedFetch } from '../../src/fetch/index.ts';
import { partitioned, tokenBucket } from '../../src/index.ts';
import { chargeOf, type Provider, startProvider } from './llm-provider.ts';

let provider: Provider;
before(async () => {
  provider = await startProvider({ hold: false, latencyMs: 2 });
});
after(() => provider.close());

for (const dialect of ['openai', 'anthropic']) {
  test(`${dialect}: at 3× the token limit over a real socket, no 429 after the first answer; streams settled from their last event`, async () => {
    // 60 000 tokens a minute, the bucket empty: every call is paced by what the fields say.
    provider.limit({ requests: 10_000, tokens: 60_000, windowMs: 60_000, empty: true });
    const limiter = partitioned({
      key: (origin: string) => origin,
      limiter: tokenBucket({ tokenLimit: 100_000, tokensPerPeriod: 1, period: '1h', unit: 'tokens' }),
    });
    let firstAnswer = Number.POSITIVE_INFINITY;
    let sent = 0;
    const statuses: { sentAt: number; status: number }[] = [];
    const api = rateLimitedFetch({
      limiter,
      cost: { estimate: chargeOf, actual: llmUsage },
      pause: { jitter: 0 },
      fetch: async (input, init) => {
        sent++;
        const sentAt = performance.now();
        const response = await fetch(input, init);
        firstAnswer = Math.min(firstAnswer, performance.now());
        statuses.push({ sentAt, status: response.status });
        return response;
      },
    });
    const stop = new AbortController();
    const calls: Promise<void>[] = [];
    let real = 0;
    // 3000 real tokens a second offered for 2.5 s: 3× the 1000 a second the provider refills.
    for (let i = 0; i < 25; i++) {
      const form = i % 2 === 0 ? 'sse' : 'json';
      real += 300;
      calls.push(
        api(provider.url(`/${dialect}/${form}/150/150?max_tokens=250`), { signal: stop.signal })
          .then((response) => response.arrayBuffer())
          .then(
            () => {},
            // Aborted at the end, while it waited (or while its body was read).
            (error: { name?: string }) => assert.equal(error.name, 'AbortError'),
          ),
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    stop.abort();
    await Promise.all(calls);
    const after = statuses.filter((s) => s.sentAt > firstAnswer);
    assert.ok(after.length >= 2, `calls sent after the first answer: ${after.length}`);
    assert.deepEqual(
      after.filter((s) => s.status !== 200),
      [],
      'nothing refused once the fields were known',
    );
    assert.ok(
      provider.admitted.calls < 25 && real > 0,
      'the calls past the budget waited (then were aborted)',
    );
    // Each admitted call was settled at its usage (300), not its estimate (400), streams included; a call sent
    // but aborted before its answer keeps its estimate (the provider may have counted it); a call aborted while
    // it waited was never sent and charges nothing.
    const admitted = statuses.filter((s) => s.status === 200).length;
    const expected = 100_000 - admitted * 300 - (sent - admitted) * 400;
    for (let i = 0; i < 200 && limiter.statistics(provider.origin).available !== expected; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(limiter.statistics(provider.origin).available, expected);
  });
}

test('a call held for the provider budget and then aborted is never sent, and gives its place up', async () => {
  provider.limit({ requests: 100, tokens: 1000, windowMs: 60_000 });
  const api = rateLimitedFetch({
    limiter: tokenBucket({ tokenLimit: 10_000, tokensPerPeriod: 10_000, period: '1s' }),
    cost: { estimate: chargeOf },
    pause: { jitter: 0 },
  });
  assert.equal((await api(provider.url('/openai/json/990/0'))).status, 200);
  const hits = provider.hits.length;
  const stop = new AbortController();
  // 500 tokens: about 30 s of refill.
  const held = api(provider.url('/openai/json/500/0'), { signal: stop.signal });
  await new Promise((resolve) => setTimeout(resolve, 50));
  stop.abort(new Error('gave up'));
  await assert.rejects(held, { message: 'gave up' });
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(provider.hits.length, hits, 'nothing was sent');
  // It gave its place up: a small call is not held behind its 500 tokens (about 30 s).
  const small = api(provider.url('/openai/json/5/0')).then((r) => r.status);
  const late = new Promise((resolve) => setTimeout(resolve, 5_000, 'held').unref());
  assert.equal(await Promise.race([small, late]), 200);
});
