/**
 * A failure is scoped to the slots that failed: on a real 3-master Cluster with one replica each, a master is
 * killed and its replica takes over. Keys on the two healthy masters keep deciding on Redis throughout (not one
 * `onUnavailable` answer); keys on the killed master get `onUnavailable` until the replica serves them, then
 * Redis again. Both clients. The deadline is generous (a busy 2-core machine must not time a healthy call out).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fixedWindow, type Lease } from '../../src/index.ts';
import { scriptRunner } from '../../src/redis/client.ts';
import { isUnavailableAnswer, redisStore } from '../../src/redis/index.ts';
import { keySlot } from '../../src/redis/slot.ts';
import { type ClusterConnect, clusterClients } from '../support/cluster-clients.ts';
import { type ClusterNode, RedisCluster } from '../support/redis-server.ts';
import { uniqueName } from './twin.ts';

let cluster: RedisCluster;
before(async () => {
  cluster = await RedisCluster.start(3, 1);
});
after(() => cluster.stop());

/** Partition keys whose slot (under the store's key layout, `{key}`) each master serves. */
export function keysOn(masters: ClusterNode[], perMaster: number): string[][] {
  const out: string[][] = masters.map(() => []);
  for (let i = 0; out.some((keys) => keys.length < perMaster); i++) {
    const key = `user-${i}`;
    const slot = keySlot(`{${key}}`);
    const at = masters.findIndex((m) => m.slots.some(([lo, hi]) => slot >= lo && slot <= hi));
    if (at >= 0 && out[at].length < perMaster) out[at].push(key);
  }
  return out;
}

const connectors = (): Record<string, ClusterConnect> => clusterClients(() => cluster.nodes);

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const names = Object.keys(connectors());
for (const [run, name] of names.entries()) {
  test(`${name}: a killed master and its replica's takeover cost onUnavailable answers to its keys only`, async () => {
    // The first run kills one master, the second another (whoever masters its range by then).
    const masters = (await cluster.describe()).filter((n) => n.role === 'master' && n.slots.length > 0);
    assert.equal(masters.length, 3, 'three masters serve slots');
    const keys = keysOn(masters, 4);
    const victim = run % 3;
    const { client, close } = await connectors()[name]();
    const store = redisStore({ client, timeoutMs: 1500, retryIntervalMs: 200, onUnavailable: 'fail-closed' });
    const limiter = store.partitioned({
      name: uniqueName(),
      key: (user: string) => user,
      limiter: fixedWindow({ permitLimit: 1_000_000, window: 600_000 }),
    });
    // One loop per key: every answer recorded by master and by when it was asked.
    const answers: { master: number; lease: Lease; started: number }[] = [];
    let running = true;
    const loops = keys.flatMap((group, master) =>
      group.map(async (key) => {
        while (running) {
          const started = performance.now();
          const lease = await limiter.tryAcquire(key);
          answers.push({ master, lease, started });
          await new Promise((r) => setTimeout(r, 5));
        }
      }),
    );
    const fromRedisSince = (master: number, t: number) =>
      answers.some((a) => a.master === master && a.started >= t && !isUnavailableAnswer(a.lease));
    try {
      await until('first decisions on every master', () => [0, 1, 2].every((m) => fromRedisSince(m, 0)));
      // The client's slot map names each key's master: a failure is scoped to that node.
      const runner = scriptRunner(client);
      for (const [m, group] of keys.entries()) {
        assert.equal(runner.nodeOf?.(keySlot(`{${group[0]}}`)), `127.0.0.1:${masters[m].server.port}`);
      }
      const replica = (await cluster.describe()).find((n) => n.masterId === masters[victim].id);
      assert.ok(replica, 'the victim has a replica');
      await masters[victim].server.kill();
      const killed = performance.now();
      await until('onUnavailable answers for the killed master', () =>
        answers.some((a) => a.master === victim && a.started > killed && isUnavailableAnswer(a.lease)),
      );
      await replica.server.cli('cluster', 'failover', 'takeover');
      await until('the replica serves the range', async () =>
        (await cluster.describe(replica.server)).some((n) => n.id === replica.id && n.role === 'master'),
      );
      const promoted = performance.now();
      await until('decisions on Redis again for the killed range', () => fromRedisSince(victim, promoted));
      // The healthy masters decided throughout, ahead of and after the failover too.
      await until('healthy masters after', () =>
        [0, 1, 2].filter((m) => m !== victim).every((m) => fromRedisSince(m, promoted)),
      );
      // Enough of them to mean something, however fast the client saw the failover (valkey-glide's took 0.5 s).
      await until(
        'a hundred decisions on the healthy masters',
        () => answers.filter((a) => a.master !== victim).length > 100,
      );
    } finally {
      running = false;
      await Promise.all(loops);
      await close();
      // The old master comes back as a replica, so the next run has three masters with replicas again.
      await masters[victim].server.restart();
      await cluster.settled(cluster.servers, 0).catch(() => {});
    }
    const healthy = answers.filter((a) => a.master !== victim);
    const spurious = healthy.filter((a) => isUnavailableAnswer(a.lease)).length;
    assert.ok(healthy.length > 100, `healthy masters decided ${healthy.length} times`);
    assert.equal(
      spurious,
      0,
      `${spurious} of ${healthy.length} decisions on healthy masters were onUnavailable's`,
    );
    assert.ok(
      answers.some((a) => a.master === victim && isUnavailableAnswer(a.lease)),
      'the killed master did cost answers (the test saw the outage)',
    );
  });
}
