/**
 * A real 3-master Redis Cluster started by the harness, with both clients: decisions for keys in every master's
 * slot range, batches split per slot, chains in one slot through a shared hash tag (and a clear error without
 * one), and scripts reloaded on every node after SCRIPT FLUSH.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fixedWindow, tokenBucket } from '../../src/index.ts';
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

/** Partition keys whose slots (under the store's key layout) fall in each of the three masters' ranges. */
function keysPerRange(perRange: number): string[][] {
  const ranges = [
    [0, 5460],
    [5461, 10922],
    [10923, 16383],
  ];
  const out: string[][] = ranges.map(() => []);
  for (let i = 0; out.some((keys) => keys.length < perRange); i++) {
    const key = `user-${i}`;
    const slot = keySlot(`{${key}}`);
    const range = ranges.findIndex(([lo, hi]) => slot >= lo && slot <= hi);
    if (out[range].length < perRange) out[range].push(key);
  }
  return out;
}

const connectors = clusterClients(() => cluster.nodes);

/** MOVED replies sent by every node so far (`INFO errorstats`). */
async function movedReplies(): Promise<number> {
  let moved = 0;
  for (const server of cluster.servers) {
    moved += Number(/errorstat_MOVED:count=(\d+)/.exec(await server.cli('info', 'errorstats'))?.[1] ?? 0);
  }
  return moved;
}

for (const [name, connect] of Object.entries(connectors)) {
  test(`${name} cluster: keys in every slot range, per-slot batches, chains by hash tag, SCRIPT and FUNCTION FLUSH`, async () => {
    const { client, close } = await connect();
    const errors: Error[] = [];
    const store = redisStore({
      client,
      timeoutMs: 3000,
      onUnavailable: 'fail-closed',
      onError: (e) => errors.push(e),
    });
    try {
      const limiter = store.partitioned({
        name: uniqueName(),
        key: (user: string) => user,
        limiter: fixedWindow({ permitLimit: 2, window: 60_000 }),
      });
      const ranges = keysPerRange(20);
      const users = ranges.flat();
      const movedBefore = await movedReplies();
      // Three requests per user, all issued in one tick: coalesced into one call per slot.
      const leases = await Promise.all(users.flatMap((u) => [0, 1, 2].map(() => limiter.tryAcquire(u))));
      for (let i = 0; i < users.length; i++) {
        assert.deepEqual(
          leases.slice(3 * i, 3 * i + 3).map((l) => [l.granted, l.reason]),
          [
            [true, undefined],
            [true, undefined],
            [false, 'limit'],
          ],
          users[i],
        );
      }
      // Each call goes to its slot's node at once: a client that cannot tell a call's slot sends it to any node,
      // which answers MOVED (iovalkey did, given the command's name in capitals).
      assert.equal((await movedReplies()) - movedBefore, 0, 'no call was redirected');
      const sizes = await Promise.all(cluster.servers.map((s) => s.cli('dbsize')));
      assert.ok(
        sizes.every((n) => Number(n) >= 20),
        `every master holds keys: ${sizes}`,
      );

      // A chain of a per-user limiter and a global one shares the global's hash tag.
      const tagged = store.partitioned({
        name: uniqueName(),
        key: (user: string) => user,
        hashTag: () => 'api',
        limiter: fixedWindow({ permitLimit: 1, window: 60_000 }),
      });
      const global = store.limiter(tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: 60_000 }), {
        name: uniqueName(),
        hashTag: 'api',
      });
      const both = store.chain(tagged, global);
      const chained = [];
      for (const u of ['a', 'a', 'b', 'c', 'd']) chained.push(await both.tryAcquire(u));
      assert.deepEqual(
        chained.map((l) => l.granted),
        [true, false, true, true, false],
      );
      assert.equal((await tagged.statistics('d')).available, 1, 'the global rejection burnt nothing of d');
      const untagged = store.chain(limiter, global);
      await assert.rejects(() => untagged.tryAcquire('a'), /share one Redis Cluster slot.*hashTag/);

      // Scripts and Functions flushed on every node: reloaded where needed.
      await Promise.all(cluster.servers.map((s) => s.cli('script', 'flush')));
      await Promise.all(cluster.servers.map((s) => s.cli('function', 'flush')));
      const again = await Promise.all(ranges.map((keys) => limiter.tryAcquire(keys[0])));
      assert.ok(
        again.every((l) => l.reason === 'limit'),
        "again.every((l) => l.reason === 'limit')",
      );
      assert.deepEqual(errors, []);
    } finally {
      await close();
    }
  });
}
