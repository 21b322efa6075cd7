import assert from 'node:assert/strict';
import { test } from 'node:test';
import { concurrency, fixedWindow, partitioned } from '../../src/index.ts';
import { manualClock } from '../support/clock.ts';
import { adapters, get } from './apps.ts';

for (const [adapter, start] of Object.entries(adapters)) {
  test(`${adapter}: the RateLimit-Policy and RateLimit fields follow setLimit, for a hot key too`, async () => {
    const clock = manualClock(0, false);
    const inFlight = concurrency({ permitLimit: 2 });
    const perClient = fixedWindow({ permitLimit: 10, window: '1m', clock });
    const byClient = partitioned({ key: () => 'one-client', limiter: perClient });
    const app = await start({
      options: { policies: { db: { limiter: inFlight }, api: { limiter: byClient } } },
      routes: [
        { path: '/db', limit: 'db' },
        { path: '/api', limit: 'api' },
      ],
    });
    try {
      const before = await get(`${app.url}/db`);
      assert.equal(before.status, 200);
      assert.match(before.headers.get('ratelimit-policy') ?? '', /^"db";q=2;qu="concurrent-requests"$/);
      assert.match(before.headers.get('ratelimit') ?? '', /^"db";r=1$/);
      inFlight.setLimit(5);
      const after = await get(`${app.url}/db`);
      assert.match(after.headers.get('ratelimit-policy') ?? '', /^"db";q=5;qu="concurrent-requests"$/);
      assert.match(after.headers.get('ratelimit') ?? '', /^"db";r=4$/);

      const first = await get(`${app.url}/api`);
      assert.match(first.headers.get('ratelimit-policy') ?? '', /"api";q=10;w=60;pk=/);
      assert.match(first.headers.get('ratelimit') ?? '', /"api";r=9;t=60;pk=/);
      perClient.setLimit(3); // the same key again: its cached policy item must be built anew
      const second = await get(`${app.url}/api`);
      assert.match(second.headers.get('ratelimit-policy') ?? '', /"api";q=3;w=60;pk=/);
      assert.match(second.headers.get('ratelimit') ?? '', /"api";r=1;t=60;pk=/);
      await get(`${app.url}/api`);
      const rejected = await get(`${app.url}/api`);
      assert.equal(rejected.status, 429);
      assert.match(rejected.headers.get('ratelimit-policy') ?? '', /"api";q=3;w=60/);
    } finally {
      await app.close();
    }
  });
}
