/** Costs on Redis: not yet — a cost limiter is refused when made, and a Redis lease cannot be settled. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fixedWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { clients } from './clients.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(() => server.stop());

test('a Redis store refuses a limiter with a cost unit, naming it', () => {
  const store = redisStore({ client: { evalsha() {}, eval() {} } as never });
  const tokens = tokenBucket({ tokenLimit: 10, tokensPerPeriod: 1, period: 1000, unit: 'tokens' });
  assert.throws(() => store.limiter(tokens, { name: 'x' }), {
    name: 'TypeError',
    message: /^store.limiter: a Redis store cannot settle costs yet; this limiter counts "tokens"/,
  });
  assert.throws(
    () => store.partitioned({ name: 'p', key: (k: string) => k, limiter: tokens }),
    /cannot settle costs yet/,
  );
});

test("a Redis store's lease cannot be settled: a TypeError, and nothing is charged", async () => {
  const c = await clients.ioredis(server.port);
  try {
    const store = redisStore({ client: c.client, timeoutMs: 2000 });
    const limiter = store.limiter(fixedWindow({ permitLimit: 10, window: 60_000 }), { name: uniqueName() });
    const lease = await limiter.tryAcquire(4);
    assert.equal(lease.granted, true);
    assert.throws(() => lease.settle(9), { name: 'TypeError', message: /only a grant .* in memory/ });
    assert.equal((await limiter.tryAcquire(6)).granted, true);
  } finally {
    await c.close();
  }
});
