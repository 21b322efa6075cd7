import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { headerValue } from '../../src/http/index.ts';
import { chain, fixedWindow } from '../../src/index.ts';
import { TotalQuota } from '../limiters/sample-limiter.ts';
import { manualClock } from '../support/clock.ts';
import { adapters, get, withApp } from './apps.ts';

// A limiter of the user's own, written only against the public contract (test/limiters/sample-limiter.ts): the
// HTTP layer decides it, names it in the header fields and reads its key exactly as it does floodgate's own.
const user = headerValue('x-user');

for (const name of Object.keys(adapters)) {
  describe(`${name}: a limiter of the user's own as an HTTP policy`, () => {
    test('its quota per key, its header fields, its 429', async () => {
      const global = new TotalQuota({ quota: 2, key: (req: unknown) => user(req as never) ?? 'anonymous' });
      await withApp(name, { options: { global }, routes: [{ path: '/a' }] }, async (base) => {
        const alice = { 'x-user': 'alice' };
        const first = await get(`${base}/a`, alice);
        assert.equal(first.status, 200);
        assert.match(first.headers.get('ratelimit-policy') ?? '', /^"global";q=2;pk=:[^:]+:$/);
        assert.match(first.headers.get('ratelimit') ?? '', /^"global";r=1;pk=:/);
        assert.equal((await get(`${base}/a`, alice)).status, 200);
        const third = await get(`${base}/a`, alice);
        assert.equal(third.status, 429);
        assert.match(third.headers.get('ratelimit') ?? '', /^"global";r=0;pk=:/);
        assert.equal((await get(`${base}/a`, { 'x-user': 'bob' })).status, 200, 'bob has his own quota');
      });
    });

    test('inside a chain with a built-in limiter (global and route policy): all or nothing', async () => {
      const clock = manualClock(0, false);
      const window = fixedWindow({ permitLimit: 3, window: '1m', clock });
      const quota = new TotalQuota({ quota: 1, key: (req: unknown) => user(req as never) ?? 'anonymous' });
      const spec = {
        options: { global: window, policies: { trial: chain(quota) } },
        routes: [{ path: '/trial', limit: 'trial' }, { path: '/free' }],
      };
      await withApp(name, spec, async (base) => {
        const carol = { 'x-user': 'carol' };
        const ok = await get(`${base}/trial`, carol);
        assert.equal(ok.status, 200);
        assert.match(ok.headers.get('ratelimit-policy') ?? '', /^"global";q=3;w=60, "trial";q=1;pk=:/);
        const refused = await get(`${base}/trial`, carol);
        assert.equal(refused.status, 429);
        assert.match(refused.headers.get('ratelimit') ?? '', /"trial";r=0;pk=:/, 'the quota said no');
        // The refused request took nothing from the global window: two of three are left for /free.
        assert.deepEqual(
          [
            (await get(`${base}/free`)).status,
            (await get(`${base}/free`)).status,
            (await get(`${base}/free`)).status,
          ],
          [200, 200, 429],
        );
      });
    });
  });
}
