/**
 * Leased decisions on a real 3-master Redis Cluster, with both clients: two stores (two processes' worth) take
 * batches for keys in every master's slot range, and each key admits exactly its limit in the window; a token
 * bucket (its holders' key beside it, in the same slot) at most its tokens, a concurrency limit its permits.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { concurrency, fixedWindow, slidingWindow, tokenBucket } from '../../src/index.ts';
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

/** Three partition keys per master's slot range. */
function keys(): string[] {
  const ranges = [
    [0, 5460],
    [5461, 10922],
    [10923, 16383],
  ];
  const out: string[][] = ranges.map(() => []);
  for (let i = 0; out.some((k) => k.length < 3); i++) {
    const key = `tenant-${i}`;
    const slot = keySlot(`{${key}}`);
    const range = ranges.findIndex(([lo, hi]) => slot >= lo && slot <= hi);
    if (out[range].length < 3) out[range].push(key);
  }
  return out.flat();
}

const connectors = clusterClients(() => cluster.nodes);

for (const [name, connect] of Object.entries(connectors)) {
  for (const kind of ['fixed', 'sliding', 'bucket', 'concurrency'] as const) {
    test(`${name} cluster, ${kind}: leased keys in every slot range admit exactly the limit across two stores`, async () => {
      const [a, b] = await Promise.all([connect(), connect()]);
      const limiterName = uniqueName();
      // A bucket of 100 (a reserve of 1) that does not refill during the test; a concurrency limit never released.
      const limit = kind === 'bucket' ? 100 : 40;
      const spec = () =>
        kind === 'fixed'
          ? fixedWindow({ permitLimit: 40, window: 60_000 })
          : kind === 'sliding'
            ? slidingWindow({ permitLimit: 40, window: 60_000, segmentsPerWindow: 3 })
            : kind === 'bucket'
              ? tokenBucket({ tokenLimit: 100, tokensPerPeriod: 1, period: 600_000 })
              : concurrency({ permitLimit: 40 });
      const stores = [a, b].map((c) =>
        redisStore({ client: c.client, timeoutMs: 3000, onUnavailable: 'fail-closed' }),
      );
      const limiters = stores.map((store) =>
        store.partitioned({ name: limiterName, key: (k: string) => k, limiter: spec(), leases: true }),
      );
      try {
        for (const key of keys()) {
          let granted = 0;
          for (let i = 0; i < limit * 1.5; i++) {
            const leases = await Promise.all(limiters.map((l) => l.tryAcquire(key)));
            for (const lease of leases) {
              assert.notEqual(lease.reason, 'unavailable', key);
              if (lease.granted) granted++;
            }
          }
          // A bucket's batch may strand its one spare token at the end: never more than the limit.
          if (kind === 'bucket') assert.ok(granted >= limit - 1 && granted <= limit, `${key}: ${granted}`);
          else assert.equal(granted, limit, key);
        }
        assert.equal(stores[0].unavailable + stores[1].unavailable, 0);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });
  }
}
