/**
 * Priority classes across a fleet: `concurrency({ classes })` on a Redis store, used by several clients (each its
 * own connection and store, as separate processes would), against a real redis-server. Property: whatever the
 * interleaving of takes and releases from the clients, every decision is the one the shares say for the fleet's
 * held permits (the memory limiter's, too): sheddable traffic is refused first, and a critical request is never
 * refused while the fleet's critical share is unused.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { concurrency, type Lease, type Priority } from '../../src/index.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { uniqueName } from './twin.ts';

const RUNS = Number(process.env.FLOODGATE_REDIS_RUNS ?? 25);
const RANK: Record<string, number> = { critical: 2, default: 1, sheddable: 0 };
const rankOf = (p: Priority | undefined) => (p === undefined ? 1 : typeof p === 'number' ? p : RANK[p]);

let server: RedisServer;
let clients: Redis[];
let stores: RedisStore[];
before(async () => {
  server = await RedisServer.start();
  clients = [0, 1, 2].map(() => new Redis({ port: server.port }));
  stores = clients.map((client) => redisStore({ client, timeoutMs: 5000 }));
});
after(async () => {
  for (const c of clients) c.disconnect();
  await server.stop();
});

const priority = fc.constantFrom<Priority | undefined>(undefined, 'critical', 'default', 'sheddable', 4);
const script = fc.array(
  fc.oneof(
    {
      weight: 3,
      arbitrary: fc.record({
        op: fc.constant('take' as const),
        client: fc.integer({ min: 0, max: 2 }),
        permits: fc.integer({ min: 1, max: 3 }),
        priority,
      }),
    },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), pick: fc.nat() }) },
  ),
  { maxLength: 40 },
);

test('property: three clients share the classes of one Redis limiter exactly', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 10 }),
      fc.record(
        {
          critical: fc.double({ min: 0, max: 0.45, noNaN: true }),
          default: fc.double({ min: 0, max: 0.45, noNaN: true }),
        },
        { requiredKeys: [] },
      ),
      script,
      async (limit, reserve, steps) => {
        const name = uniqueName();
        const spec = () => concurrency({ permitLimit: limit, classes: { reserve } });
        const fleet = stores.map((store) => store.limiter(spec(), { name }));
        const model = spec();
        const ceiling = (rank: number) => {
          let reserved = 0;
          for (const [k, share] of Object.entries(reserve)) if (RANK[k] > rank) reserved += share;
          return reserved === 0 ? limit : Math.max(1, Math.floor(limit * (1 - reserved)));
        };
        const live: { remote: Lease; local: Lease; permits: number; client: number }[] = [];
        let held = 0;
        for (const step of steps) {
          if (step.op === 'release') {
            if (live.length === 0) continue;
            const [one] = live.splice(step.pick % live.length, 1);
            one.remote.release();
            one.local.release();
            held -= one.permits;
            // The release is sent without waiting: a peek through its client's connection orders it first.
            await fleet[one.client].statistics();
            continue;
          }
          if (step.permits > limit) continue;
          const rank = rankOf(step.priority);
          const remote = await fleet[step.client].tryAcquire(step.permits, step.priority);
          const local = model.tryAcquire(step.permits, step.priority);
          const want = held + step.permits <= ceiling(rank);
          assert.equal(remote.granted, want, `client ${step.client}, rank ${rank}, ${held} held of ${limit}`);
          assert.equal(local.granted, want, 'the memory limiter decides alike');
          if (rank >= 2 && held + step.permits <= limit)
            assert.ok(remote.granted, 'critical refused with room');
          if (remote.granted) {
            held += step.permits;
            live.push({ remote, local, permits: step.permits, client: step.client });
          }
        }
        for (const one of live) one.remote.release();
      },
    ),
    { numRuns: RUNS },
  );
});

test('a chain and a partitioned limiter on Redis take the class too; a queued critical waiter goes first', async () => {
  const name = uniqueName();
  const [a, b] = stores;
  const spec = () => concurrency({ permitLimit: 4, queueLimit: 4, classes: { reserve: { critical: 0.5 } } });
  const byTenant = a.partitioned({ name, key: (t: string) => t, limiter: spec() });
  const other = b.partitioned({ name, key: (t: string) => t, limiter: spec() });
  assert.ok((await byTenant.tryAcquire('x', 2, 'sheddable')).granted);
  assert.equal((await other.tryAcquire('x', 1, 'sheddable')).granted, false, 'the fleet holds 2 of 2');
  const crit = await other.tryAcquire('x', 2, 'critical');
  assert.ok(crit.granted, 'critical into the reserve, from the other client');
  const window = a.limiter(spec(), { name: `${name}-w` });
  const both = b.chain(
    b.partitioned({ name, key: (t: string) => t, limiter: spec() }),
    b.limiter(spec(), { name: `${name}-w` }),
  );
  assert.equal((await both.tryAcquire('x', 1, 'critical')).granted, false, 'x is full');
  const y = await both.tryAcquire('y', 2, 'sheddable');
  assert.ok(y.granted);
  assert.equal((await window.tryAcquire(1, 'default')).granted, false, 'the chain took 2 of the plain one');
  // Queued: a sheddable waiter, then a critical one; one permit back lets the critical one in first.
  const held = await window.tryAcquire(2, 'critical');
  assert.ok(held.granted);
  const order: string[] = [];
  const shed = window.acquire(1, { priority: 'sheddable' }).then((l) => {
    order.push(`sheddable ${l.granted}`);
    return l;
  });
  const critical = window.acquire(1, { priority: 'critical' }).then((l) => {
    order.push(`critical ${l.granted}`);
    return l;
  });
  await new Promise((r) => setTimeout(r, 30));
  held.release();
  const first = await critical;
  assert.deepEqual(order, ['critical true'], 'the critical waiter is served first');
  first.release();
  y.release(); // 1 held: the sheddable waiter fits under its share (2) now
  crit.release();
  assert.ok((await shed).granted);
  assert.deepEqual(order, ['critical true', 'sheddable true']);
  (await shed).release();
});
