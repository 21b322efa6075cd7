import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { metrics } from '@opentelemetry/api';
import { adaptiveConcurrency, partitioned } from '../../src/index.ts';
import { eventLoopMonitor } from '../../src/limiters/event-loop.ts';
import { resetTelemetry } from '../../src/telemetry.ts';
import { manualClock } from '../support/clock.ts';

const recorded: Array<{ name: string; value: number; attributes?: Record<string, unknown> }> = [];
// A MeterProvider that records every measurement, standing in for an SDK.
const instrument = (name: string) => ({
  add: (value: number, attributes?: Record<string, unknown>) => recorded.push({ name, value, attributes }),
  record: () => {},
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

test('floodgate.concurrency.limit follows the limit; floodgate.concurrency.shed counts by class and reason', () => {
  const clock = manualClock(0, false);
  const limiter = adaptiveConcurrency({
    clock,
    algorithm: 'aimd',
    timeout: '1h', // a fixed threshold: nothing probed, the limit starts at initialLimit
    initialLimit: 10,
    window: 10,
    minSamples: 1,
  });
  const held = Array.from({ length: 10 }, () => limiter.tryAcquire());
  limiter.tryAcquire(1, 'sheddable');
  clock.advance(20);
  for (const lease of held) lease.release({ dropped: true });
  const gauge = recorded.filter((r) => r.name === 'floodgate.concurrency.limit');
  assert.equal(
    gauge.reduce((sum, r) => sum + r.value, 0),
    limiter.statistics().limit,
    'the gauge sums to the current limit',
  );
  assert.equal(limiter.statistics().limit, 9);
  const shed = recorded.filter((r) => r.name === 'floodgate.concurrency.shed');
  assert.deepEqual(shed, [
    { name: 'floodgate.concurrency.shed', value: 1, attributes: { class: 'sheddable', reason: 'limit' } },
  ]);
});

test('the default event-loop monitor reports a blocked loop as a stall', () => {
  const monitor = eventLoopMonitor();
  const since = performance.now();
  while (performance.now() - since < 200) {
    // block the loop, as a long GC pause would
  }
  assert.equal(monitor.stalledSince(since, performance.now()), true);
});

test('floodgate.concurrency.limit sums the limits of live partitions, under { partitioned: true } and no key', () => {
  recorded.length = 0;
  const clock = manualClock(0, false);
  const limiter = partitioned({
    key: (user: string) => user,
    limiter: adaptiveConcurrency({
      clock,
      algorithm: 'aimd',
      timeout: '1h', // nothing probed
      initialLimit: 10,
      window: 10,
      minSamples: 1,
    }),
    maxPartitions: 1,
  });
  const sum = (): number =>
    recorded
      .filter((r) => r.name === 'floodgate.concurrency.limit' && r.attributes?.partitioned === true)
      .reduce((total, r) => total + r.value, 0);
  const held = Array.from({ length: 10 }, () => limiter.tryAcquire('ann'));
  assert.equal(sum(), 10, 'a new partition adds its initial limit');
  clock.advance(20);
  for (const lease of held) lease.release({ dropped: true });
  assert.equal(sum(), 9, 'a change in a partition moves the sum by the change');
  // 'ann' is idle now: a new key needs the room and drops it, and its limit leaves the sum.
  limiter.tryAcquire('bob').release();
  assert.equal(limiter.size, 1);
  assert.equal(sum(), 10, "the dropped partition's limit left the sum; bob's came in");
  const plain = recorded.filter(
    (r) => r.name === 'floodgate.concurrency.limit' && !r.attributes?.partitioned,
  );
  assert.equal(
    plain.reduce((total, r) => total + r.value, 0),
    0,
    "the template given to partitioned() takes its own unused limit out of the plain limiters' series",
  );
  for (const r of recorded.filter((r) => r.name === 'floodgate.concurrency.limit')) {
    assert.ok(!('key' in (r.attributes ?? {})) && Object.keys(r.attributes ?? {}).length <= 1, 'bounded');
  }
});
