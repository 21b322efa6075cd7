/**
 * Leased concurrency permits (`leases: true` on `concurrency(...)`, issue 26) on a real redis-server, one process:
 * permits are granted and released locally and reused without a command; every permit a store holds (in use or
 * free) is its entry in Redis, so two stores never hold more than the limit together; free permits go back after
 * a sweep; an entry not renewed expires after `leaseTtlMs`; a lock and queues keep working.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { concurrency } from '../../src/index.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let store: RedisStore;
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  store = redisStore({ client, timeoutMs: 5000 });
});
after(async () => {
  client.disconnect();
  await server.stop();
});

async function calls(): Promise<number> {
  const info = String(await client.info('commandstats'));
  let total = 0;
  for (const m of info.matchAll(/cmdstat_(?:fcall|evalsha|eval):calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

/** The permits Redis counts as held on `key` (live entries). */
async function heldInRedis(key: string): Promise<number> {
  const entries = await client.zrange(key, '0', '-1');
  return entries.reduce((n, e) => n + Number(e.split(':')[0]), 0);
}

const holderOf = (s: RedisStore) =>
  (s as unknown as { context: { engine: { leasePrefix: string } } }).context.engine.leasePrefix;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('permits are granted and released here, and reused with no command while they are in use', async () => {
  const name = uniqueName();
  const limiter = store.limiter(concurrency({ permitLimit: 100 }), { name, leases: true });
  const first = await Promise.all(Array.from({ length: 20 }, () => limiter.tryAcquire()));
  assert.ok(first.every((l) => l.granted));
  for (const l of first) l.release();
  const before = await calls();
  for (let round = 0; round < 50; round++) {
    const leases = await Promise.all(Array.from({ length: 20 }, () => limiter.tryAcquire()));
    assert.ok(leases.every((l) => l.granted));
    for (const l of leases) l.release();
  }
  assert.equal((await calls()) - before, 0, '1000 acquisitions and releases, no command');
  assert.equal(limiter.granted, 1020);
});

test('two stores never hold more than the limit together: what one holds free, the other is refused', async () => {
  const name = uniqueName();
  const other = redisStore({ client, timeoutMs: 5000 });
  const a = store.limiter(concurrency({ permitLimit: 10 }), { name, leases: true });
  const b = other.limiter(concurrency({ permitLimit: 10 }), { name, leases: true });
  const held = [];
  for (let i = 0; i < 7; i++) held.push(await a.tryAcquire());
  const fromB = [];
  for (let i = 0; i < 5; i++) fromB.push(await b.tryAcquire());
  assert.deepEqual(
    fromB.map((l) => l.granted),
    [true, true, true, false, false],
  );
  assert.equal(await heldInRedis(`floodgate:{${name}}`), 10);
  const refused = fromB[3];
  assert.equal(refused.reason, 'limit');
  assert.equal(refused.remaining, 0);
  // a releases three: they stay a's (free in its batch) until a sweep finds them unused, then b may have them.
  for (const l of held.slice(0, 3)) l.release();
  assert.equal((await b.tryAcquire()).granted, false, "a's free permits are still a's");
  await sleep(200);
  assert.equal(await heldInRedis(`floodgate:{${name}}`), 7);
  assert.equal((await b.tryAcquire()).granted, true);
});

test("an entry not renewed expires after its TTL: a dead process's permits come back", async () => {
  const name = uniqueName();
  const key = `floodgate:{${name}}`;
  // A dead process's entry, as its last take wrote it: 4 permits, expiring 300 ms from now (Redis's clock).
  const [seconds, micros] = await client.time();
  await client.zadd(key, Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + 300, '4:dead/b');
  const b = store.limiter(concurrency({ permitLimit: 4 }), { name, leases: true });
  assert.equal((await b.tryAcquire()).granted, false, 'held by the dead process');
  await sleep(350);
  assert.equal((await b.tryAcquire()).granted, true, 'back after the TTL');
  assert.deepEqual(await client.zrange(key, '0', '-1'), [`1:${holderOf(store)}/b`], 'the dead entry is gone');
});

test('a held entry is renewed while its permits are in use', async () => {
  const name = uniqueName();
  const s = redisStore({ client, timeoutMs: 5000, leaseTtlMs: 300 });
  const a = s.limiter(concurrency({ permitLimit: 4 }), { name, leases: true });
  const lease = await a.tryAcquire();
  assert.ok(lease.granted);
  await sleep(700);
  assert.equal(await heldInRedis(`floodgate:{${name}}`), 1, 'still counted after twice the TTL');
  lease.release();
  await sleep(200);
  assert.equal(await heldInRedis(`floodgate:{${name}}`), 0, 'given back once free and unused');
});

test('a probe takes nothing; a locked key is refused as locked; a queued request gets a permit released here', async () => {
  const name = uniqueName();
  const partitioned = store.partitioned({
    name,
    key: (k: string) => k,
    limiter: concurrency({ permitLimit: 2, queueLimit: 1 }),
    leases: true,
  });
  const probe = await partitioned.tryAcquire('k', 0);
  assert.ok(probe.granted);
  assert.equal(await heldInRedis(`floodgate:{k}:${name}`), 0);
  const one = await partitioned.tryAcquire('k');
  const two = await partitioned.tryAcquire('k');
  assert.ok(one.granted && two.granted);
  const queued = partitioned.acquire('k');
  setTimeout(() => one.release(), 20);
  assert.ok((await queued).granted, 'woken by the local release');
  await partitioned.lock('j', '1m');
  const locked = await partitioned.tryAcquire('j');
  assert.equal(locked.granted, false);
  assert.equal(locked.reason, 'locked');
});

test('onUnavailable answers a take Redis cannot serve', async () => {
  const broken = new Redis({ port: server.port, lazyConnect: true, enableOfflineQueue: false });
  const failing = redisStore({
    client: broken,
    timeoutMs: 50,
    onUnavailable: 'fail-closed',
    onError: () => {},
  });
  const limiter = failing.limiter(concurrency({ permitLimit: 10 }), { name: uniqueName(), leases: true });
  const lease = await limiter.tryAcquire();
  assert.equal(lease.granted, false);
  assert.equal(lease.reason, 'unavailable');
  assert.equal(failing.unavailable, 1);
  broken.disconnect();
});

test('leases refuse a concurrency limit with priority classes', () => {
  assert.throws(
    () =>
      store.limiter(concurrency({ permitLimit: 10, classes: { reserve: { critical: 0.2 } } }), {
        name: uniqueName(),
        leases: true,
      }),
    /store\.limiter: leases cannot keep priority classes' shares/,
  );
});
