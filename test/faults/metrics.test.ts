/**
 * Metrics as OpenTelemetry's semantic conventions (and ASP.NET Core's `aspnetcore.rate_limiting.*`) have them:
 * durations in seconds, a description on every instrument, the meter's version, only documented attributes, and
 * `time_in_queue` recorded under the result the wait really ended with. The clock is `performance.now`, mocked.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, mock, test } from 'node:test';
import { metrics } from '@opentelemetry/api';
import { RateLimiting } from '../../src/http/rate-limiting/engine.ts';
import type { HttpRequest } from '../../src/http/request.ts';
import { requestTimeouts } from '../../src/http/timeouts/engine.ts';
import { concurrency } from '../../src/index.ts';
import { METER_VERSION, metricsRecorded, resetTelemetry, telemetry } from '../../src/telemetry.ts';

type Options = { description?: string; unit?: string };
let created: Array<{ kind: string; name: string; options: Options }>;
let recorded: Array<{ name: string; value: number; attributes: Record<string, unknown> }>;
let meters: Array<[string, string | undefined]>;
let now = 0;

beforeEach(() => {
  created = [];
  recorded = [];
  meters = [];
  const make = (kind: string) => (name: string, options: Options) => {
    created.push({ kind, name, options });
    const write = (value: number, attributes: Record<string, unknown>) =>
      recorded.push({ name, value, attributes });
    return { add: write, record: write };
  };
  const meter = {
    createCounter: make('counter'),
    createUpDownCounter: make('updown'),
    createHistogram: make('histogram'),
  };
  metrics.setGlobalMeterProvider({
    getMeter: (name: string, version?: string) => {
      meters.push([name, version]);
      return meter;
    },
  } as never);
  resetTelemetry();
  mock.method(performance, 'now', () => now);
});

afterEach(() => {
  mock.restoreAll();
  metrics.disable();
  resetTelemetry();
});

test('every instrument has a description; durations are in seconds; the meter has its version', () => {
  telemetry();
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  assert.deepEqual(meters, [['floodgate', pkg.version]]);
  assert.equal(METER_VERSION, pkg.version);
  assert.ok(created.length >= 10);
  for (const { name, options } of created) assert.ok(options?.description, `${name} has a description`);
  for (const { kind, name, options } of created) {
    if (kind === 'histogram') assert.equal(options.unit, 's', name);
  }
});

const req: HttpRequest = { remoteAddress: '127.0.0.1', method: 'GET', path: '/', header: () => undefined };

test('time_in_queue records the real result; queue and lease instruments carry only the policy', async () => {
  // A route that can queue: 5 admitted at once, 1 queued and admitted later, 3 rejected with the queue full.
  const owner = new RateLimiting({ policies: { q: concurrency({ permitLimit: 5, queueLimit: 1 }) } });
  const mixed = owner.route('q');
  const held = [];
  for (let i = 0; i < 5; i++)
    held.push(await owner.decide(req, undefined, mixed, () => undefined, undefined));
  const waiting = owner.decide(req, undefined, mixed, () => undefined, undefined); // queued
  const full = [];
  for (let i = 0; i < 3; i++)
    full.push(await owner.decide(req, undefined, mixed, () => undefined, undefined));
  assert.deepEqual(
    full.map((d) => d.result),
    ['queue_full', 'queue_full', 'queue_full'],
  );
  now += 1500;
  owner.release(held[0]); // the queued one gets its permit after 1.5 s
  const admitted = await waiting;
  now += 250;
  owner.release(admitted);
  for (const decision of held.slice(1)) owner.release(decision);

  const inQueue = recorded.filter((r) => r.name === 'floodgate.time_in_queue');
  const byResult = new Map<unknown, number>();
  for (const r of inQueue) byResult.set(r.attributes.result, (byResult.get(r.attributes.result) ?? 0) + 1);
  assert.deepEqual(Object.fromEntries(byResult), { acquired: 6, queue_full: 3 });
  assert.ok(
    inQueue.some((r) => r.value === 1.5 && r.attributes.result === 'acquired'),
    'seconds, not ms',
  );
  const leases = recorded.filter((r) => r.name === 'floodgate.lease_duration');
  assert.ok(leases.some((r) => r.value === 0.25));
  for (const name of ['floodgate.queued_requests', 'floodgate.active_leases', 'floodgate.lease_duration']) {
    const attributes = recorded.filter((r) => r.name === name).map((r) => r.attributes);
    assert.ok(attributes.length > 0, name);
    for (const a of attributes) assert.deepEqual(a, { policy: 'q' }, name);
  }
});

test('a canceled wait is recorded under canceled', async () => {
  const engine = new RateLimiting({ policies: { q: concurrency({ permitLimit: 1, queueLimit: 1 }) } });
  const route = engine.route('q');
  const first = await engine.decide(req, undefined, route, () => undefined, undefined);
  const controller = new AbortController();
  const waiting = engine.decide(req, undefined, route, () => controller.signal, undefined);
  now += 400;
  controller.abort(new DOMException('gone', 'AbortError'));
  assert.equal((await waiting).result, 'canceled');
  engine.release(first);
  const canceled = recorded.filter(
    (r) => r.name === 'floodgate.time_in_queue' && r.attributes.result === 'canceled',
  );
  assert.deepEqual(
    canceled.map((r) => r.value),
    [0.4],
  );
});

test('overrun_duration is in seconds, with http.route when the adapter knows the template', () => {
  const engine = requestTimeouts({ default: '1s' });
  const adapter = {
    expire: () => 'answered' as const,
    describe: () => ({ route: '/users/7', method: 'GET' }),
    template: () => '/users/:id',
  };
  const context = engine.start(adapter, undefined);
  context.expire();
  context.markTimedOut(true);
  context.doneAt = context.deadline + 2500;
  engine.reportOverrun(context);
  const overrun = recorded.filter((r) => r.name === 'floodgate.overrun_duration');
  assert.deepEqual(overrun, [
    {
      name: 'floodgate.overrun_duration',
      value: 2.5,
      attributes: { policy: 'default', 'http.route': '/users/:id' },
    },
  ]);
  engine.unschedule(context);
});

test('with @opentelemetry/api installed but no SDK registered, nothing is recorded and metricsRecorded() says so', () => {
  // What an application without metrics looks like when another dependency brought the API in: adapters then
  // skip the work that only feeds metric attributes (Express's route lookahead for unmarked routes, Hono's
  // matched routes).
  metrics.disable();
  resetTelemetry();
  assert.equal(metricsRecorded(), false);
  // Registered (before floodgate's first use): recorded.
  const instrument = () => ({ add() {}, record() {} });
  const meter = { createCounter: instrument, createUpDownCounter: instrument, createHistogram: instrument };
  metrics.setGlobalMeterProvider({ getMeter: () => meter } as never);
  resetTelemetry();
  assert.equal(metricsRecorded(), true);
});
