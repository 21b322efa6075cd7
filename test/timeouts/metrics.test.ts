import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { metrics } from '@opentelemetry/api';
import { requestTimeouts } from '../../src/adapters/node/index.ts';
import { resetTelemetry } from '../../src/telemetry.ts';

type Recorded = Array<{ name: string; value: number; attributes?: Record<string, unknown> }>;
const recorded: Recorded = [];

// A MeterProvider that records every measurement, standing in for an SDK.
const instrument = (name: string) => ({
  add: (value: number, attributes?: Record<string, unknown>) => recorded.push({ name, value, attributes }),
  record: (value: number, attributes?: Record<string, unknown>) => recorded.push({ name, value, attributes }),
});
const meter = { createCounter: instrument, createUpDownCounter: instrument, createHistogram: instrument };

before(() => {
  metrics.setGlobalMeterProvider({ getMeter: () => meter } as never);
  resetTelemetry();
});
after(() => {
  metrics.disable();
  resetTelemetry();
});

test('timeouts, overruns and overrun duration are recorded by policy', async () => {
  const wrap = requestTimeouts({ default: '100ms', policies: { other: '80ms' } });
  // The slow handler finishes when the test says so (after the 504 and the other request), not after a sleep
  // that a loaded machine can outlast.
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const handler = wrap(async (_req, res) => {
    await finished;
    res.end('late');
  });
  const named = wrap(async (_req, res) => {
    await sleep(10);
    res.end('in time');
  }, 'other');
  const server = http.createServer((req, res) =>
    req.url === '/named' ? named(req, res) : handler(req, res),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    assert.equal((await fetch(`${base}/slow`)).status, 504);
    assert.equal((await fetch(`${base}/named`)).status, 200);
    const at504 = recorded.map((r) => r.name);
    assert.deepEqual(at504, ['floodgate.request_timeouts', 'floodgate.handler_overruns']);
    assert.deepEqual(recorded[0].attributes, { policy: 'default', result: 'answered' });
    assert.deepEqual(recorded[1].attributes, { policy: 'default' });
    finish();
    for (let i = 0; i < 1000 && !recorded.some((r) => r.name === 'floodgate.overrun_duration'); i++)
      await sleep(5);
    const duration = recorded.find((r) => r.name === 'floodgate.overrun_duration');
    assert.ok(duration, 'overrun duration not recorded when the handler finished');
    assert.deepEqual(duration.attributes, { policy: 'default' });
    // In seconds: a fraction of a second here; in milliseconds it would be hundreds (the exact value:
    // test/faults/metrics).
    assert.ok(duration.value > 0 && duration.value < 60, `overrun of ${duration.value} s`);
    assert.equal(recorded.filter((r) => r.name === 'floodgate.request_timeouts').length, 1);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
