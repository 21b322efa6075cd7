import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { jsonUsage, llmUsage, rateLimitedFetch, sseUsage } from '../../src/fetch/index.ts';
import { concurrency, partitioned, tokenBucket } from '../../src/index.ts';
import { type Provider, startProvider } from './llm-provider.ts';

let provider: Provider;
before(async () => {
  provider = await startProvider();
});
after(() => provider.close());

const hour = 3_600_000;
const budget = () => tokenBucket({ tokenLimit: 10_000, tokensPerPeriod: 1, period: hour, unit: 'tokens' });

/** Turns of the event loop until `check` holds (the settle follows the reader's read of the body). */
async function eventually(check: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !check(); i++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(check(), 'never settled');
}

/** A budget of 10 000 tokens per origin, never refilled within a test; `left()` reads the provider's. */
function perOrigin() {
  const limiter = partitioned({ key: (origin: string) => origin, limiter: budget() });
  return { limiter, left: () => limiter.statistics(provider.origin).available };
}

for (const [vendor, form] of [
  ['openai', 'json'],
  ['anthropic', 'json'],
  ['openai', 'sse'],
  ['anthropic', 'sse'],
] as const) {
  test(`${vendor} ${form}: a call reserves its estimate and is settled at the usage the answer reports`, async () => {
    const { limiter, left } = perOrigin();
    const api = rateLimitedFetch({ limiter, cost: { estimate: () => 100, actual: llmUsage } });
    const response = await api(provider.url(`/${vendor}/${form}/230/70`));
    if (form === 'sse') {
      // The first event reaches the caller while the provider still holds the rest: nothing waits for the end.
      const reader = response.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      assert.match(first, /^(event|data)/);
      assert.equal(left(), 10_000 - 100, 'the estimate is charged until the usage comes');
      provider.release();
      while (!(await reader.read()).done) {}
    } else {
      await response.json();
    }
    await eventually(() => left() === 10_000 - 300);
  });
}

test('an answer without usage keeps the estimate; a reader of your own decides the cost', async () => {
  const { limiter, left } = perOrigin();
  const api = rateLimitedFetch({ limiter, cost: { estimate: () => 100, actual: jsonUsage } });
  await (await api(provider.url('/none'))).json();
  for (let i = 0; i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(left(), 10_000 - 100);
  const custom = rateLimitedFetch({
    limiter,
    cost: { estimate: () => 10, actual: (response) => Number(response.headers.get('content-length')) },
  });
  await (await custom(provider.url('/none'))).text();
  await eventually(() => left() === 10_000 - 100 - 11);
  for (const actual of [() => Promise.reject(new Error('no')), () => Number.NaN, () => -5]) {
    const broken = rateLimitedFetch({ limiter, cost: { estimate: () => 1, actual } });
    await (await broken(provider.url('/none'))).text();
  }
  for (let i = 0; i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(left(), 10_000 - 100 - 11 - 3, 'a rejection or a bad number keeps the estimate');
});

test('sseUsage and jsonUsage read the usage shapes of both providers', async () => {
  const read = async (path: string, reader: (r: Response) => Promise<number | undefined>) => {
    const response = fetch(provider.url(path));
    const done = reader(await response);
    provider.release();
    return done;
  };
  assert.equal(await read('/openai/sse/5/7', sseUsage), 12);
  assert.equal(await read('/anthropic/sse/5/7', sseUsage), 12);
  assert.equal(await read('/openai/json/5/7', jsonUsage), 12);
  assert.equal(await read('/anthropic/json/5/7', jsonUsage), 12);
  assert.equal(await read('/none', jsonUsage), undefined);
  assert.equal(await jsonUsage(new Response('not json')), undefined);
  assert.equal(
    await sseUsage(
      new Response('data: {"usage":{"input_tokens":3}}\r\n\r\ndata: {"usage":{"output_tokens":4}}'),
    ),
    7,
    'CRLF lines, and a last event without its blank line',
  );
});

test('bad cost options and estimates: errors naming them', async () => {
  assert.throws(() => rateLimitedFetch({ limiter: budget(), cost: { estimate: 5 } as never }), {
    name: 'TypeError',
    message: /rateLimitedFetch: cost.estimate must be a function/,
  });
  assert.throws(
    () => rateLimitedFetch({ limiter: budget(), cost: { estimate: () => 1, guess: 1 } as never }),
    {
      name: 'TypeError',
      message: /^rateLimitedFetch: cost: unknown option "guess"/,
    },
  );
  assert.throws(
    () =>
      rateLimitedFetch({
        limiter: concurrency({ permitLimit: 2, queueLimit: 5 }),
        cost: { estimate: () => 1 },
      }),
    { name: 'TypeError', message: /cost needs a time-based limiter/ },
  );
  const api = rateLimitedFetch({ limiter: budget(), cost: { estimate: () => -1 } });
  await assert.rejects(api(provider.url('/none')), {
    name: 'RangeError',
    message: /cost.estimate\(\) must return a whole number ≥ 0; got -1/,
  });
  const huge = rateLimitedFetch({ limiter: budget(), cost: { estimate: () => 20_000 } });
  await assert.rejects(huge(provider.url('/none')), {
    name: 'RangeError',
    message: /the call's cost estimate \(20000\) exceeds the limit \(10000\) of its limiter.*overdraw: true/,
  });
});

test('an estimate above the limit: rejected at once (queued or not), or sent with overdraw: true', async () => {
  const before = provider.hits.length;
  for (const queueLimit of [0, 50_000]) {
    const limiter = tokenBucket({
      tokenLimit: 10_000,
      tokensPerPeriod: 1,
      period: hour,
      unit: 'tokens',
      queueLimit,
    });
    const api = rateLimitedFetch({ limiter, cost: { estimate: () => 20_000 } });
    await assert.rejects(api(provider.url('/none')), /estimate \(20000\) exceeds the limit \(10000\)/);
  }
  assert.equal(provider.hits.length, before, 'nothing was sent');
  const limiter = partitioned({
    key: (origin: string) => origin,
    limiter: tokenBucket({
      tokenLimit: 10_000,
      tokensPerPeriod: 1,
      period: hour,
      unit: 'tokens',
      overdraw: true,
    }),
  });
  const api = rateLimitedFetch({ limiter, onLimited: 'throw', cost: { estimate: () => 20_000 } });
  assert.equal((await api(provider.url('/openai/json/230/70'))).status, 200);
  assert.equal(provider.hits.length, before + 1);
  // The bucket is 10 000 in debt now: the next big call is refused, it does not go.
  await assert.rejects(api(provider.url('/openai/json/230/70')), { name: 'RateLimitedError' });
  assert.equal(provider.hits.length, before + 1);
});

test('bad estimates reject the call before anything is sent: negative, fractional, non-finite, not a number', async () => {
  const before = provider.hits.length;
  for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '5', undefined]) {
    const api = rateLimitedFetch({ limiter: budget(), cost: { estimate: () => bad as number } });
    await assert.rejects(api(provider.url('/none')), {
      name: 'RangeError',
      message: /rateLimitedFetch: cost.estimate\(\) must return a whole number ≥ 0; got /,
    });
  }
  const throwing = rateLimitedFetch({
    limiter: budget(),
    cost: {
      estimate: () => {
        throw new Error('no estimate');
      },
    },
  });
  await assert.rejects(throwing(provider.url('/none')), { message: 'no estimate' });
  assert.equal(provider.hits.length, before, 'nothing was sent');
});

test('a reader that throws, or reports a non-finite, negative or fractional cost, keeps the estimate', async () => {
  const { limiter, left } = perOrigin();
  const readers = [
    () => {
      throw new Error('reader broke');
    },
    () => Number.POSITIVE_INFINITY,
    () => -3,
    () => 2.5,
    () => '12' as unknown as number,
  ];
  for (const actual of readers) {
    const api = rateLimitedFetch({ limiter, cost: { estimate: () => 7, actual } });
    const response = await api(provider.url('/openai/json/5/5'));
    assert.equal((await response.json()).usage.total_tokens, 10, "the caller's body is untouched");
  }
  for (let i = 0; i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(left(), 10_000 - 7 * readers.length);
});

test('the undici interceptor takes a cost: the estimate reserved, settled from a copy of the body, streams included', async () => {
  const { Agent, request } = await import('undici');
  const { rateLimitInterceptor } = await import('../../src/fetch/index.ts');
  const { limiter, left } = perOrigin();
  const agent = new Agent().compose(
    rateLimitInterceptor({
      limiter,
      cost: { estimate: (url) => (url.pathname.includes('sse') ? 50 : 40), actual: llmUsage },
    }),
  );
  try {
    const json = await request(provider.url('/anthropic/json/20/13'), { dispatcher: agent });
    assert.equal(((await json.body.json()) as { usage: { output_tokens: number } }).usage.output_tokens, 13);
    await eventually(() => left() === 10_000 - 33);
    const stream = await request(provider.url('/openai/sse/30/12'), { dispatcher: agent });
    // The first event reaches the caller while the provider holds the rest: the estimate is charged meanwhile.
    const chunks = stream.body[Symbol.asyncIterator]();
    const first = await chunks.next();
    assert.match(String(first.value), /^data/);
    assert.equal(left(), 10_000 - 33 - 50);
    provider.release();
    while (!(await chunks.next()).done) {}
    await eventually(() => left() === 10_000 - 33 - 42);
    // A body without usage keeps the estimate.
    await (await request(provider.url('/none'), { dispatcher: agent })).body.text();
    for (let i = 0; i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(left(), 10_000 - 33 - 42 - 40);
  } finally {
    await agent.close();
  }
  // An estimate above the limit: the request fails at once, nothing sent.
  const huge = new Agent().compose(
    rateLimitInterceptor({ limiter: budget(), cost: { estimate: () => 20_000 } }),
  );
  const hits = provider.hits.length;
  try {
    await assert.rejects(request(provider.url('/none'), { dispatcher: huge }), {
      name: 'RangeError',
      message: /cost estimate \(20000\) exceeds the limit \(10000\)/,
    });
    assert.equal(provider.hits.length, hits);
  } finally {
    await huge.close();
  }
  assert.throws(() => rateLimitInterceptor({ limiter: budget(), cost: { estimate: 3 } as never }), {
    name: 'TypeError',
    message: /rateLimitInterceptor: cost.estimate must be a function/,
  });
});

test('a call aborted while it waits for the provider budget charges nothing: it was never sent', async () => {
  // Every answer says the provider has no tokens left for a minute: the next call is held after its grant.
  const server = http.createServer((_req, res) => {
    res.setHeader('x-ratelimit-limit-tokens', '1000');
    res.setHeader('x-ratelimit-remaining-tokens', '0');
    res.setHeader('x-ratelimit-reset-tokens', '60s');
    res.end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const limiter = partitioned({ key: (o: string) => o, limiter: budget() });
    const api = rateLimitedFetch({ limiter, cost: { estimate: () => 100 } });
    await (await api(`${origin}/first`)).text();
    assert.equal(limiter.statistics(origin).available, 9_900);
    const abort = new AbortController();
    const held = api(`${origin}/second`, { signal: abort.signal });
    await eventually(() => limiter.statistics(origin).available === 9_800);
    abort.abort();
    await assert.rejects(held, { name: 'AbortError' });
    assert.equal(limiter.statistics(origin).available, 9_900, 'its estimate came back');
  } finally {
    server.close();
  }
});
