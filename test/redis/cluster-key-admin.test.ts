/**
 * Key administration on a real 3-master Redis Cluster, with both clients: keys in every master's slot range
 * locked, read, unlocked, charged and reset; a chain (one hash tag) locked as one.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { concurrency, fixedWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { keySlot } from '../../src/redis/slot.ts';
import { clusterClients } from '../support/cluster-clients.ts';
import { RedisCluster } from '../support/redis-server.ts';
import { uniqueName } from './twin.ts';

let cluster: RedisCluster;
before(async () => {
  cluster = await RedisCluster.start(3);
});
after(() => cluster.stop());

/** One partition key per master's slot range. */
function keyPerRange(): string[] {
  const ranges = [
    [0, 5460],
    [5461, 10922],
    [10923, 16383],
  ];
  return ranges.map(([lo, hi]) => {
    for (let i = 0; ; i++) {
      const slot = keySlot(`{user-${i}}`);
      if (slot >= lo && slot <= hi) return `user-${i}`;
    }
  });
}

for (const [name, connect] of Object.entries(clusterClients(() => cluster.nodes))) {
  test(`${name} cluster: lock, state, unlock, charge and reset on every master; a chain locked as one`, async () => {
    const { client, close } = await connect();
    const store = redisStore({ client, timeoutMs: 3000, onUnavailable: 'fail-closed' });
    try {
      const window = store.partitioned({
        name: uniqueName(),
        key: (k: string) => k,
        limiter: fixedWindow({ permitLimit: 3, window: 60_000 }),
      });
      const held = store.partitioned({
        name: uniqueName(),
        key: (k: string) => k,
        limiter: concurrency({ permitLimit: 2 }),
      });
      for (const key of keyPerRange()) {
        assert.ok((await window.tryAcquire(key)).granted, key);
        await window.lock(key, '1m');
        await held.lock(key, '1m');
        const locked = await window.tryAcquire(key);
        assert.equal(locked.reason, 'locked', key);
        assert.ok(locked.retryAfterMs! > 50_000, key);
        assert.equal((await held.tryAcquire(key)).reason, 'locked', key);
        const state = await window.state(key);
        assert.equal(state?.remaining, 2, key);
        assert.ok(state!.lockedForMs > 50_000, key);
        await window.unlock(key);
        await held.unlock(key);
        assert.ok((await window.tryAcquire(key)).granted, key);
        await window.charge(key, 1);
        assert.equal((await window.state(key))?.remaining, 0, key);
        await window.reset(key);
        assert.equal(await window.state(key), undefined, key);
        assert.ok((await held.tryAcquire(key)).granted, key);
      }
      const perUser = store.partitioned({
        name: uniqueName(),
        key: (k: string) => k,
        hashTag: () => 'api',
        limiter: fixedWindow({ permitLimit: 5, window: 60_000 }),
      });
      const perUserBucket = store.partitioned({
        name: uniqueName(),
        key: (k: string) => k,
        hashTag: () => 'api',
        limiter: tokenBucket({ tokenLimit: 5, tokensPerPeriod: 1, period: 1000 }),
      });
      const both = store.chain(perUser, perUserBucket);
      await both.lock('mallory', '10s');
      assert.equal((await both.tryAcquire('mallory')).reason, 'locked');
      assert.ok((await both.tryAcquire('alice')).granted);
      assert.ok((await both.state('mallory'))!.lockedForMs > 9000);
      await both.reset('mallory');
      assert.ok((await both.tryAcquire('mallory')).granted);
    } finally {
      await close();
    }
  });
}
