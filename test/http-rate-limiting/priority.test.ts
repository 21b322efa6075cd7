import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import type { Priority } from '../../src/index.ts';
import { adaptiveConcurrency, partitioned } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';
import { adapters, get, userOf } from './apps.ts';

// A limit of 5 with 40 % reserved for critical traffic: default and sheddable requests get 3 permits at most.
function reserved() {
  return adaptiveConcurrency({
    clock: manualClock(0, false),
    algorithm: 'aimd',
    initialLimit: 5,
    minLimit: 5,
    maxLimit: 5,
    classes: { reserve: { critical: 0.4 } },
  });
}

// The class from the user the framework's own auth set: read the framework's way, so it is its own request.
const byUser = (req: unknown): Priority => (userOf(req)?.id === 'ops' ? 'critical' : 'sheddable');

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
}

for (const [adapter, start] of Object.entries(adapters)) {
  test(`${adapter}: a policy's priority(req, res) sheds sheddable requests while critical ones use the reserve`, async () => {
    const limiter = reserved();
    let seen = 0;
    const app = await start({
      auth: true,
      options: {
        policies: {
          api: {
            limiter,
            priority: (req: unknown, res: unknown) => {
              assert.ok(res !== undefined, 'the hook gets the response too');
              seen++;
              return byUser(req);
            },
          },
        },
      },
      routes: [{ path: '/', limit: 'api' }],
    });
    try {
      const slow = [1, 2, 3].map(() => get(`${app.url}/?delay=300`, { 'x-user': 'batch' }));
      await until(() => limiter.statistics().inFlight === 3);
      assert.equal(limiter.statistics().inFlight, 3);
      const shed = await get(`${app.url}/`, { 'x-user': 'batch' });
      assert.equal(shed.status, 429, 'a sheddable request may not use the reserve');
      const critical = await get(`${app.url}/`, { 'x-user': 'ops' });
      assert.equal(critical.status, 200, 'a critical request is admitted into the reserve');
      assert.deepEqual(
        (await Promise.all(slow)).map((r) => r.status),
        [200, 200, 200],
      );
      await until(() => limiter.statistics().inFlight === 0);
      assert.equal(limiter.statistics().inFlight, 0, 'every permit came back');
      assert.equal(seen, 5, 'called once per request');
    } finally {
      await app.close();
    }
  });
}

for (const adapter of ['node', 'express5']) {
  test(`${adapter}: rateLimiting({ priority }) classes requests for the global limiter`, async () => {
    const global = reserved();
    const app = await adapters[adapter]({
      auth: true,
      options: { global, priority: byUser },
      routes: [{ path: '/' }],
    });
    try {
      const slow = [1, 2, 3].map(() => get(`${app.url}/?delay=300`, { 'x-user': 'batch' }));
      await until(() => global.statistics().inFlight === 3);
      assert.equal((await get(`${app.url}/`, { 'x-user': 'batch' })).status, 429);
      assert.equal((await get(`${app.url}/`, { 'x-user': 'ops' })).status, 200);
      await Promise.all(slow);
    } finally {
      await app.close();
    }
  });
}

test('node: a priority hook that answers no class is an error the framework sees, and nothing is charged', async () => {
  const global = reserved();
  const app = await adapters.node({
    options: { global, priority: () => 'urgent' as never },
    routes: [{ path: '/' }],
  });
  try {
    const answer = await get(`${app.url}/`);
    assert.equal(answer.status, 500);
    assert.equal(global.statistics().inFlight, 0);
    assert.equal(global.statistics().granted, 0);
  } finally {
    await app.close();
  }
});

test('priority is checked at construction: a function, and a misspelt name is named', () => {
  const limiter = reserved();
  assert.throws(
    () => rateLimiting({ global: limiter, priority: 'critical' as never }),
    /rateLimiting: priority must be a function; got "critical"/,
  );
  assert.throws(
    () => rateLimiting({ policies: { api: { limiter, priority: 1 as never } } }),
    /policies\.api\.priority must be a function/,
  );
  assert.throws(() => rateLimiting({ global: limiter, prority: byUser } as never), /did you mean "priority"/);
});

test('node: the class reaches a partitioned global limiter and every adaptive member of a chained route', async () => {
  const perTenant = reserved();
  const global = partitioned({ key: () => 'tenant-a', limiter: perTenant });
  const policy = reserved();
  const app = await adapters.node({
    auth: true,
    options: { global, priority: byUser, policies: { api: { limiter: policy, priority: byUser } } },
    routes: [{ path: '/' }, { path: '/api', limit: 'api' }],
  });
  try {
    // The lone partitioned limiter decides by key (no KeyedResource): the class must get there too.
    const slow = [1, 2, 3].map(() => get(`${app.url}/?delay=300`, { 'x-user': 'batch' }));
    await until(() => global.statistics('tenant-a').available === 2);
    assert.equal((await get(`${app.url}/`, { 'x-user': 'batch' })).status, 429);
    assert.equal((await get(`${app.url}/`, { 'x-user': 'ops' })).status, 200);
    await Promise.all(slow);
    // The chain of both: the global partition and the policy each keep their reserve for the critical request.
    const chained = [1, 2, 3].map(() => get(`${app.url}/api?delay=300`, { 'x-user': 'batch' }));
    await until(() => policy.statistics().inFlight === 3);
    assert.equal((await get(`${app.url}/api`, { 'x-user': 'batch' })).status, 429);
    assert.equal((await get(`${app.url}/api`, { 'x-user': 'ops' })).status, 200);
    await Promise.all(chained);
  } finally {
    await app.close();
  }
});
