/**
 * `setLimit` is for memory limiters: a Redis limiter's state is shared by every process that uses its name, each
 * sending its own settings, so neither the Redis limiter nor the limiter it was built from may change them.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { concurrency, fixedWindow, tokenBucket } from '../../src/index.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let store: RedisStore;
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  store = redisStore({ client, timeoutMs: 2000 });
});
after(async () => {
  client.disconnect();
  await server.stop();
});

test('a Redis limiter has no setLimit: a TypeError that says why, and the settings stay as Redis decides them', async () => {
  const spec = fixedWindow({ permitLimit: 2, window: '1m' });
  const limiter = store.limiter(spec, { name: uniqueName() });
  assert.throws(() => limiter.setLimit(5), {
    name: 'TypeError',
    message: /^store\.limiter: setLimit is for memory limiters; .*shared by every process/,
  });
  assert.throws(() => spec.setLimit(5), {
    name: 'TypeError',
    message: /^fixedWindow\.setLimit: this limiter gives its settings to a Redis limiter \(store\.limiter\)/,
  });
  assert.equal(spec.limit, 2);
  assert.equal(limiter.limit, 2);
  assert.equal((await limiter.tryAcquire(2)).granted, true);
  assert.equal((await limiter.tryAcquire()).granted, false);
});

test('partitioned on Redis: the same, for a single spec and for tiers once a key used them', async () => {
  const one = concurrency({ permitLimit: 1 });
  const byKey = store.partitioned({ name: uniqueName(), key: (k: string) => k, limiter: one });
  assert.throws(() => byKey.setLimit(3), /^TypeError: store\.partitioned: setLimit is for memory limiters/);
  assert.throws(
    () => one.setLimit(3),
    /concurrency\.setLimit: .*Redis limiter \(store\.partitioned: limiter\)/,
  );
  const tier = tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: '1s' });
  const tiers = store.partitioned({ name: uniqueName(), key: (k: string) => k, limiter: () => tier });
  tier.setLimit(4); // no Redis limiter has taken it yet
  assert.equal((await tiers.tryAcquire('a', 4)).granted, true);
  assert.throws(
    () => tier.setLimit(5),
    /tokenBucket\.setLimit: .*Redis limiter \(store\.partitioned: limiter\("a"\)\)/,
  );
});
