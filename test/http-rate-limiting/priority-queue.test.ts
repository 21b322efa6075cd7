import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Priority } from '../../src/index.ts';
import { chain, concurrency, partitioned } from '../../src/index.ts';
import { adapters, get, userOf } from './apps.ts';

// The class from the user the framework's own auth set.
const byUser = (req: unknown): Priority => (userOf(req)?.id === 'ops' ? 'critical' : 'sheddable');

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
}

for (const [adapter, start] of Object.entries(adapters)) {
  test(`${adapter}: priority(req, res) orders the queue of a plain concurrency limiter: a critical request evicts a sheddable waiter`, async () => {
    const limiter = concurrency({ permitLimit: 1, queueLimit: 1 });
    const app = await start({
      auth: true,
      options: { policies: { api: { limiter, priority: byUser } } },
      routes: [{ path: '/', limit: 'api' }],
    });
    try {
      // The test holds the one permit itself, so nothing depends on how long a handler takes.
      const held = limiter.tryAcquire();
      const shed = get(`${app.url}/`, { 'x-user': 'batch' });
      await until(() => limiter.statistics().queued === 1);
      assert.equal(limiter.statistics().queued, 1, 'the sheddable request waits');
      const critical = get(`${app.url}/`, { 'x-user': 'ops' });
      assert.equal((await shed).status, 429, 'evicted from the full queue by the critical one');
      assert.equal(limiter.statistics().queued, 1, 'the critical request waits in its place');
      // Another sheddable request finds the queue full of a higher class: turned away, evicting nobody.
      assert.equal((await get(`${app.url}/`, { 'x-user': 'batch' })).status, 429);
      held.release();
      assert.equal((await critical).status, 200);
      await until(() => limiter.statistics().available === 1);
      assert.deepEqual(limiter.statistics(), { available: 1, queued: 0, granted: 2, rejected: 2 });
    } finally {
      await app.close();
    }
  });
}

test('node: the class reaches the queue of a partitioned member in a chain', async () => {
  const perTenant = concurrency({ permitLimit: 1, queueLimit: 1 });
  const byTenant = partitioned({ key: () => 'tenant', limiter: perTenant });
  const global = concurrency({ permitLimit: 10 });
  const app = await adapters.node({
    auth: true,
    options: { global, priority: byUser, policies: { api: { limiter: chain(byTenant) } } },
    routes: [{ path: '/', limit: 'api' }],
  });
  try {
    const held = byTenant.tryAcquire('any request');
    const shed = get(`${app.url}/`, { 'x-user': 'batch' });
    await until(() => byTenant.statistics('tenant').queued === 1);
    const critical = get(`${app.url}/`, { 'x-user': 'ops' });
    assert.equal((await shed).status, 429);
    held.release();
    assert.equal((await critical).status, 200);
  } finally {
    await app.close();
  }
});
