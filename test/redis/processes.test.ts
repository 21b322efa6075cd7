/**
 * Four processes hammer one Redis key at once: across all of them, exactly the limit is admitted in a window
 * (windows and periods are a minute, the run well under one), for every algorithm; concurrency never holds more
 * than its limit; a chain's rejections burn nothing in any member.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { fixedWindow } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import type { Job } from './fixtures/worker.ts';
import { startWorkers, type Workers } from './fixtures/workers.ts';

const WORKERS = 4;
let server: RedisServer;
let workers: Workers;
before(async () => {
  [server, workers] = await Promise.all([RedisServer.start(), startWorkers(WORKERS)]);
});
after(async () => {
  workers.stop();
  await server.stop();
});

const sum = (reports: { granted: number }[]) => reports.reduce((total, r) => total + r.granted, 0);
const errors = (reports: { errors: number }[]) => reports.reduce((total, r) => total + r.errors, 0);

for (const kind of ['fixed', 'sliding', 'stepped', 'continuous', 'lockout'] as const) {
  test(`${kind}: ${WORKERS} processes on one key are admitted exactly the limit`, async () => {
    const job: Job = {
      port: server.port,
      kind,
      limit: 300,
      name: `p-${kind}`,
      durationMs: 700,
      inflight: 16,
    };
    const reports = await workers.run(job);
    // The invariant, whatever the schedule (on a busy machine one worker may finish before another starts):
    // the workers together were admitted exactly the limit, each ran until the budget was spent, and Redis
    // answered every decision itself.
    assert.equal(sum(reports), 300, JSON.stringify(reports.map((r) => r.granted)));
    assert.ok(
      reports.every((r) => r.rejected > 0),
      `every worker ran until turned away: ${JSON.stringify(reports.map((r) => r.rejected))}`,
    );
    assert.equal(errors(reports), 0, 'no decision fell back to onUnavailable');
  });
}

test(`concurrency: ${WORKERS} processes never hold more than the limit, and use all of it`, async () => {
  const job: Job = {
    port: server.port,
    kind: 'concurrency',
    limit: 5,
    name: 'p-cc',
    durationMs: 700,
    inflight: 8,
  };
  const reports = await workers.run(job);
  const maxHeld = Math.max(...reports.map((r) => r.maxHeld));
  assert.ok(maxHeld <= 5, `held at most ${maxHeld}`);
  assert.equal(maxHeld, 5, 'the limit was reached');
  assert.ok(sum(reports) > 20, `only ${sum(reports)} leases granted`);
  assert.equal(errors(reports), 0, 'no decision fell back to onUnavailable');
});

test('chain over Redis from 4 processes: rejections burn nothing in any member', async () => {
  // Per user 40 per minute, all users together 100: the global limit binds, and every user is short too.
  const job: Job = {
    port: server.port,
    kind: 'chain',
    limit: 100,
    perUser: 40,
    name: 'p-chain',
    durationMs: 700,
    inflight: 16,
  };
  const reports = await workers.run(job);
  assert.equal(sum(reports), 100, JSON.stringify(reports.map((r) => r.granted)));
  assert.equal(errors(reports), 0, 'no decision fell back to onUnavailable');
  const client = new Redis({ port: server.port });
  const store = redisStore({ client, timeoutMs: 5000 });
  const perUser = store.partitioned({
    name: 'p-chain-user',
    key: (user: string) => user,
    limiter: fixedWindow({ permitLimit: 40, window: 60_000 }),
  });
  for (const user of ['ann', 'bob', 'cid', 'dee']) {
    const granted = reports.reduce((total, r) => total + (r.byUser[user] ?? 0), 0);
    assert.ok(granted <= 40, `${user}: granted ${granted} of 40`);
    const { available } = await perUser.statistics(user);
    assert.equal(available, 40 - granted, `${user}: consumed exactly what was granted`);
  }
  client.disconnect();
});
