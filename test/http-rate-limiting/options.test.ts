import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { metrics } from '@opentelemetry/api';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as honoRateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { rateLimiting as nodeRateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { RateLimiting } from '../../src/http/rate-limiting/engine.ts';
import type { HttpRequest } from '../../src/http/request.ts';
import { concurrency, fixedWindow, partitioned } from '../../src/index.ts';
import { resetTelemetry } from '../../src/telemetry.ts';

const limiter = () => fixedWindow({ permitLimit: 1, window: '1m' });

describe('misconfiguration fails at construction, naming the option and the value', () => {
  const cases: Array<[string, unknown, RegExp, typeof TypeError | typeof RangeError]> = [
    ['global not a limiter', { global: 5 }, /rateLimiting: global must be a limiter.*got 5/, TypeError],
    [
      'policy without a limiter',
      { policies: { api: { limiter: 'x' } } },
      /policies\.api\.limiter must be a limiter.*"x"/,
      TypeError,
    ],
    [
      'unknown policy option',
      { policies: { api: { limiter: limiter(), permits: 2 } } },
      /policies\.api: unknown option "permits"/,
      TypeError,
    ],
    ['policy named global', { policies: { global: limiter() } }, /may not be named "global"/, RangeError],
    ['status not an error', { status: 200 }, /status must be an HTTP error status.*got 200/, RangeError],
    ['unknown body', { body: 'html' }, /body must be 'text' or 'problem\+json'; got "html"/, TypeError],
    ['unknown header style', { headers: ['draft-99'] }, /headers must be one of/, TypeError],
    ['two drafts', { headers: ['draft-10', 'draft-7'] }, /one IETF draft/, TypeError],
    ['onRejected not a function', { onRejected: 'x' }, /onRejected must be a function; got "x"/, TypeError],
    ['dryRun not a boolean', { dryRun: 'yes' }, /dryRun must be a boolean; got "yes"/, TypeError],
    ['unknown option', { windowMs: 60_000 }, /unknown option "windowMs"/, TypeError],
  ];
  for (const [name, options, message, type] of cases) {
    test(name, () => {
      assert.throws(
        () => new RateLimiting(options as never),
        (error: Error) => {
          assert.ok(error instanceof type, `${error.constructor.name}: ${error.message}`);
          assert.match(error.message, message);
          return true;
        },
      );
    });
  }
});

describe('a route naming an unknown policy fails at startup, in every adapter', () => {
  const options = { policies: { api: limiter() } };
  test('node', () => {
    assert.throws(
      () => nodeRateLimiting(options)((_req, res) => res.end(), 'apj'),
      /no rate-limiting policy named "apj" \(known: "api"\)/,
    );
  });
  test('express', () => {
    const limit = expressRateLimiting(options);
    assert.throws(() => limit.requirePolicy('apj'), /no rate-limiting policy named "apj"/);
    assert.throws(() => limit.requirePolicy(false as never), /use noRateLimit\(\)/);
  });
  test('hono', () => {
    assert.throws(
      () => honoRateLimiting(options).requirePolicy('apj'),
      /no rate-limiting policy named "apj"/,
    );
  });
  test('fastify', async () => {
    const app = Fastify();
    await app.register(fastifyRateLimiting, options);
    assert.throws(
      () => app.get('/x', { config: { rateLimit: 'apj' } }, () => 'ok'),
      /GET \/x: config.rateLimit: no rate-limiting policy named "apj"/,
    );
    await app.close();
  });
  test('fastify: bad plugin options fail register', async () => {
    const app = Fastify();
    await assert.rejects(async () => {
      await app.register(fastifyRateLimiting, { status: 200 });
    }, /status must be an HTTP error status/);
  });
  test('hono: a route marker is not silently skipped when two policies apply', async () => {
    const limit = honoRateLimiting({ policies: { a: limiter(), b: limiter() } });
    const app = new Hono();
    app.use('/x/*', limit.requirePolicy('a'));
    app.get('/x/y', limit.requirePolicy('b'), (c) => c.text('ok'));
    app.onError((error, c) => c.text(error.message, 500));
    const response = await app.request('/x/y');
    assert.equal(response.status, 500);
    assert.match(await response.text(), /already decided/);
  });
});

describe('metrics', () => {
  test('requests by policy and result; queue and lease instruments', async () => {
    const recorded: Array<[string, number, Record<string, unknown>]> = [];
    const instrument = (name: string) => ({
      add: (value: number, attributes: Record<string, unknown>) => recorded.push([name, value, attributes]),
      record: (value: number, attributes: Record<string, unknown>) =>
        recorded.push([name, value, attributes]),
    });
    const meter = { createCounter: instrument, createUpDownCounter: instrument, createHistogram: instrument };
    metrics.setGlobalMeterProvider({ getMeter: () => meter } as never);
    resetTelemetry();
    try {
      const global = fixedWindow({ permitLimit: 2, window: '1m' });
      const slots = concurrency({ permitLimit: 1, queueLimit: 1 });
      const engine = new RateLimiting({ global, policies: { slots } });
      const req: HttpRequest = {
        remoteAddress: '127.0.0.1',
        method: 'GET',
        path: '/',
        header: () => undefined,
      };
      const route = engine.route('slots');
      const first = await engine.decide(req, undefined, route, () => undefined, undefined);
      const controller = new AbortController();
      const waiting = engine.decide(req, undefined, route, () => controller.signal, undefined);
      const full = await engine.decide(req, undefined, route, () => undefined, undefined);
      controller.abort(new DOMException('gone', 'AbortError'));
      const canceled = await waiting;
      engine.release(first);
      await engine.decide(req, undefined, engine.defaultRoute, () => undefined, undefined);
      const third = await engine.decide(req, undefined, engine.defaultRoute, () => undefined, undefined);
      assert.deepEqual(
        [first.result, full.result, canceled.result, third.result],
        ['acquired', 'queue_full', 'canceled', 'global_limiter'],
      );
      const requests = recorded
        .filter(([name]) => name === 'floodgate.requests')
        .map(([, , a]) => `${a.policy}:${a.result}`);
      assert.deepEqual(requests, [
        'slots:acquired',
        'slots:queue_full',
        'slots:canceled',
        'global:acquired',
        'global:global_limiter',
      ]);
      const active = recorded.filter(([name]) => name === 'floodgate.active_leases').map(([, v]) => v);
      assert.deepEqual(active, [1, -1]);
      const queued = recorded
        .filter(([name]) => name === 'floodgate.queued_requests')
        .reduce((sum, [, v]) => sum + v, 0);
      assert.equal(queued, 0);
      assert.ok(recorded.some(([name]) => name === 'floodgate.lease_duration'));
      assert.equal(slots.statistics().available, 1);
      assert.equal(
        global.statistics().available,
        0,
        'the slots decisions spent one global permit; the canceled and rejected none',
      );
    } finally {
      metrics.disable();
      resetTelemetry();
    }
  });

  test('partitions alive, per partitioned limiter', () => {
    const recorded: Array<[string, number, Record<string, unknown>]> = [];
    const instrument = (name: string) => ({
      add: (value: number, attributes: Record<string, unknown>) => recorded.push([name, value, attributes]),
      record: () => {},
    });
    const meter = { createCounter: instrument, createUpDownCounter: instrument, createHistogram: instrument };
    metrics.setGlobalMeterProvider({ getMeter: () => meter } as never);
    resetTelemetry();
    try {
      const global = partitioned({
        key: (req: HttpRequest) => req.path,
        limiter: fixedWindow({ permitLimit: 5, window: '1m' }),
      });
      const engine = new RateLimiting({ global });
      for (const path of ['/a', '/b', '/a', '/c']) {
        const req: HttpRequest = { remoteAddress: '127.0.0.1', method: 'GET', path, header: () => undefined };
        engine.decide(req, undefined, engine.defaultRoute, () => undefined, undefined);
      }
      const partitions = recorded.filter(([name]) => name === 'floodgate.partitions');
      assert.equal(
        partitions.reduce((sum, [, v]) => sum + v, 0),
        3,
      );
      assert.deepEqual(partitions[0][2], { policy: 'global' });
    } finally {
      metrics.disable();
      resetTelemetry();
    }
  });
});
