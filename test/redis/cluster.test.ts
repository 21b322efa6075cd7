/**
 * A real 3-master Redis Cluster started by the harness, with every client: decisions for keys in every master's
 * slot range, batches split per slot, chains in one slot through a shared hash tag (and a clear error without
 * one), and scripts reloaded on every node after SCRIPT FLUSH. With valkey-glide's `GlideClusterClient` (which
 * the other Cluster tests run too; the parity suite in conformance-glide-cluster): a user whose ACL forbids
 * Functions decides by `EVALSHA`, then `EVAL` after `SCRIPT FLUSH` on every node; and every key the decision
 * code touches (MONITOR on every node) is one its call declared.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { GlideClusterClient } from '@valkey/valkey-glide';
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

/** `calls` of `command` on every node so far (`INFO commandstats`). */
async function calls(command: string): Promise<number> {
  let n = 0;
  for (const server of cluster.servers) {
    const stats = await server.cli('info', 'commandstats');
    n += Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  }
  return n;
}

test('valkey-glide cluster: a user whose ACL forbids Functions decides by EVALSHA, then EVAL after SCRIPT FLUSH', async () => {
  const user = uniqueName();
  for (const server of cluster.servers) {
    await server.cli('acl', 'setuser', user, 'on', `>${user}`, '~*', '+@all', '-fcall', '-function');
  }
  const client = await GlideClusterClient.createClient({
    addresses: cluster.nodes,
    credentials: { username: user, password: user },
  });
  try {
    const errors: Error[] = [];
    const store = redisStore({ client, timeoutMs: 3000, onError: (e) => errors.push(e) });
    // Partitions spread over the masters (each key its own slot), three requests each in one tick.
    const limiter = store.partitioned({
      name: uniqueName(),
      key: (user: string) => user,
      limiter: fixedWindow({ permitLimit: 2, window: 60_000 }),
    });
    const users = Array.from({ length: 12 }, (_, i) => `u${i}`);
    const evalshaBefore = await calls('evalsha');
    const first = await Promise.all(users.flatMap((u) => [0, 1].map(() => limiter.tryAcquire(u))));
    assert.ok(
      first.every((l) => l.granted),
      'two of two granted',
    );
    assert.ok((await calls('evalsha')) > evalshaBefore, 'decided by EVALSHA');
    await Promise.all(cluster.servers.map((s) => s.cli('script', 'flush')));
    const evalBefore = await calls('eval');
    const third = await Promise.all(users.map((u) => limiter.tryAcquire(u)));
    assert.deepEqual(
      third.map((l) => l.reason),
      users.map(() => 'limit'),
      'answered by Redis after SCRIPT FLUSH',
    );
    assert.ok((await calls('eval')) > evalBefore, 'EVAL after NOSCRIPT');
    assert.deepEqual(errors, []);
    assert.equal(store.unavailable, 0);
  } finally {
    client.close();
    for (const server of cluster.servers) await server.cli('acl', 'deluser', user);
  }
});

/** A MONITOR line's quoted arguments, unescaped enough to compare keys. */
function argsOf(line: string): string[] {
  return [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1].replace(/\\(["\\])/g, '$1'));
}

test('valkey-glide cluster: the decision code touches only the keys its call declares (MONITOR on every node)', async () => {
  const monitors: { process: ChildProcess; out: string }[] = cluster.servers.map((s) => {
    const monitor = { process: spawn('redis-cli', ['-p', String(s.port), 'monitor']), out: '' };
    monitor.process.stdout!.on('data', (d) => {
      monitor.out += d;
    });
    return monitor;
  });
  // MONITOR answers OK once it listens.
  while (monitors.some((m) => !m.out.startsWith('OK'))) await new Promise((r) => setTimeout(r, 10));
  const { client, close } = await clusterClients(() => cluster.nodes)['valkey-glide']();
  try {
    const store = redisStore({ client, timeoutMs: 3000, onUnavailable: 'fail-closed' });
    const specs = [
      fixedWindow({ permitLimit: 3, window: 60_000 }),
      slidingWindow({ permitLimit: 3, window: 60_000, segmentsPerWindow: 4 }),
      tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: 60_000 }),
      concurrency({ permitLimit: 2 }),
    ];
    for (const spec of specs) {
      for (const leases of [false, true]) {
        const limiter = store.partitioned({
          name: uniqueName(),
          key: (k: string) => k,
          limiter: spec,
          leases,
        });
        const chained = store.chain(
          store.limiter(spec, { name: uniqueName(), hashTag: 'chain' }),
          store.partitioned({
            name: uniqueName(),
            key: (k: string) => k,
            hashTag: () => 'chain',
            limiter: spec,
          }),
        );
        for (const key of ['a', 'b', 'c']) {
          const leased = await Promise.all([1, 2, 3, 4].map(() => limiter.tryAcquire(key)));
          const both = await chained.tryAcquire(key);
          for (const lease of [...leased, both]) lease.release();
        }
        await limiter.lock('b', 60_000);
        await limiter.charge('c', 1);
        await limiter.state('c');
        await limiter.unlock('b');
        await limiter.reset('a');
      }
    }
  } finally {
    await close();
    await new Promise((r) => setTimeout(r, 100));
    for (const m of monitors) m.process.kill();
  }
  let scripts = 0;
  let touched = 0;
  for (const { out } of monitors) {
    let declared: Set<string> | undefined;
    for (const line of out.split('\n')) {
      if (line.includes(' [0 lua] ')) {
        const [command, key] = argsOf(line);
        if (command.toUpperCase() === 'TIME') continue;
        touched++;
        assert.ok(declared?.has(key), `${line.slice(0, 200)}: not among the keys its call declared`);
        continue;
      }
      const [command, , numKeys, ...rest] = argsOf(line);
      const name = command?.toUpperCase();
      if (name === 'FCALL' || name === 'EVALSHA' || name === 'EVAL') {
        scripts++;
        declared = new Set(rest.slice(0, Number(numKeys)));
      } else {
        declared = undefined;
      }
    }
  }
  assert.ok(scripts > 50 && touched > 100, `${scripts} decision calls, ${touched} keys touched`);
});
