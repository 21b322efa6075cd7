/**
 * Priority classes across instances, over real sockets: two application instances (an ioredis and a node-redis
 * client) share one `concurrency({ classes })` budget on a real redis-server. Sheddable requests through one
 * instance fill their share; a sheddable request through the other is refused, and a critical one is admitted
 * into the reserve, in every adapter. The policy's `priority(req, res)` hook reads the framework's own request.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Priority } from '../../src/index.ts';
import { concurrency } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';
import { type AppSpec, adapters, get, userOf } from './apps.ts';

let server: RedisServer;
const open: TestClient[] = [];
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await Promise.all(open.map((c) => c.close()));
  await server.stop();
});

const byUser = (req: unknown): Priority => (userOf(req)?.id === 'ops' ? 'critical' : 'sheddable');

async function instance(kind: 'ioredis' | 'node-redis', name: string): Promise<AppSpec> {
  const c = await clients[kind](server.port);
  open.push(c);
  const store = redisStore({ client: c.client, timeoutMs: 2000 });
  // 5 permits, 40 % kept for critical requests: sheddable ones hold 3 at most, fleet-wide.
  const slots = store.limiter(concurrency({ permitLimit: 5, classes: { reserve: { critical: 0.4 } } }), {
    name,
  });
  return {
    auth: true,
    options: { policies: { api: { limiter: slots, priority: byUser } } },
    routes: [{ path: '/', limit: 'api' }],
  };
}

async function until(done: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400 && !(await done()); i++) await new Promise((r) => setTimeout(r, 5));
}

for (const [adapter, start] of Object.entries(adapters)) {
  test(`${adapter}: sheddable requests are refused fleet-wide while critical ones use the reserve`, async () => {
    const name = `classes-${adapter}`;
    const [one, two] = [
      await start(await instance('ioredis', name)),
      await start(await instance('node-redis', name)),
    ];
    const probe = redisStore({ client: open[open.length - 1].client, timeoutMs: 2000 }).limiter(
      concurrency({ permitLimit: 5, classes: { reserve: { critical: 0.4 } } }),
      { name },
    );
    try {
      const slow = [1, 2, 3].map(() => get(`${one.url}/?delay=400`, { 'x-user': 'batch' }));
      // `statistics` answers for the default class, whose share is 3 of 5: none left once the three hold theirs.
      await until(async () => (await probe.statistics()).available <= 0);
      const shed = await get(`${two.url}/`, { 'x-user': 'batch' });
      assert.equal(shed.status, 429, 'the other instance may not give a sheddable request the reserve');
      const critical = await get(`${two.url}/`, { 'x-user': 'ops' });
      assert.equal(critical.status, 200, 'a critical request is admitted into the reserve');
      assert.deepEqual(
        (await Promise.all(slow)).map((r) => r.status),
        [200, 200, 200],
      );
      await until(async () => (await probe.statistics()).available === 3);
      assert.equal((await probe.statistics()).available, 3, 'every permit came back');
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });
}
