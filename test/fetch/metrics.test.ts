import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { metrics } from '@opentelemetry/api';
import { rateLimitedFetch } from '../../src/fetch/index.ts';
import { fixedWindow } from '../../src/index.ts';
import { resetTelemetry } from '../../src/telemetry.ts';
import { handClock, startServer, type TestServer } from './server.ts';

const recorded: Array<{ name: string; value: number; attributes?: Record<string, unknown> }> = [];
// A MeterProvider that records every measurement, standing in for an SDK.
const instrument = (name: string) => ({
  add: (value: number, attributes?: Record<string, unknown>) => recorded.push({ name, value, attributes }),
  record: () => {},
});
const meter = { createCounter: instrument, createUpDownCounter: instrument, createHistogram: instrument };

let a: TestServer;
before(async () => {
  metrics.setGlobalMeterProvider({ getMeter: () => meter } as never);
  resetTelemetry();
  a = await startServer();
});
after(async () => {
  metrics.disable();
  resetTelemetry();
  await a.close();
});

test('floodgate.client.calls counts sent, limited and paused calls by origin', async () => {
  let first = true;
  a.respond = (_req, res) => {
    if (!first) return res.end('ok');
    first = false;
    res.writeHead(429, { 'retry-after': '60' }).end();
  };
  const clock = handClock();
  const api = rateLimitedFetch({
    limiter: fixedWindow({ permitLimit: 2, window: '1h' }),
    onLimited: 'respond',
    clock,
  });
  const statuses: number[] = [];
  const call = async () => {
    const response = await api(a.url());
    statuses.push(response.status);
    await response.text();
  };
  await call(); // sent: the server's 429 pauses the origin for 60 s (up to 66 s with jitter)
  await call(); // paused: a local 429
  clock.advance(70_000);
  await call(); // sent
  await call(); // limited: the window's 2 permits are spent
  assert.deepEqual(statuses, [429, 429, 200, 429]);
  const calls = recorded.filter((m) => m.name === 'floodgate.client.calls');
  const count = (result: string) =>
    calls.filter((m) => m.attributes?.result === result && m.attributes?.origin === a.origin).length;
  const { sent, limited, paused } = api.statistics;
  assert.deepEqual(
    { sent: count('sent'), limited: count('limited'), paused: count('paused') },
    { sent, limited, paused },
  );
  assert.deepEqual(api.statistics, {
    sent: 2,
    limited: 1,
    paused: 1,
    throttled: 0,
    retries: 0,
    budgetExhausted: 0,
  });
});

test('floodgate.client.calls counts throttled calls; floodgate.client.retries counts retries and refusals', async () => {
  a.respond = (_req, res) => res.writeHead(500).end();
  recorded.length = 0;
  const api = rateLimitedFetch({
    limiter: fixedWindow({ permitLimit: 100, window: '1h' }),
    clock: handClock(),
    random: () => 0,
    onLimited: 'respond',
    retry: { attempts: 1, minRetries: 1 },
    adaptive: { minRequests: 3 },
  });
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) {
    const response = await api(a.url());
    statuses.push(response.status);
    await response.text();
  }
  // 1: 500, and its retry (minRetries) 500; 2: 500, no budget left for a retry; 3 and 4: throttled locally
  // (3 requests in the history, none accepted: p = 3/4, then 4/5).
  assert.deepEqual(statuses, [500, 500, 503, 503]);
  const count = (name: string, result: string) =>
    recorded.filter(
      (m) => m.name === name && m.attributes?.result === result && m.attributes?.origin === a.origin,
    ).length;
  assert.equal(count('floodgate.client.calls', 'throttled'), 2);
  assert.equal(count('floodgate.client.retries', 'retried'), 1);
  assert.equal(count('floodgate.client.retries', 'budget-exhausted'), 1);
  assert.deepEqual(api.statistics, {
    sent: 3,
    limited: 0,
    paused: 0,
    throttled: 2,
    retries: 1,
    budgetExhausted: 1,
  });
});
