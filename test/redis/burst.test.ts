/**
 * A burst of 2 000 decisions issued in one tick, on a store that has not loaded its Function yet (FUNCTION FLUSH
 * first), with both clients: every decision is Redis's (none answered by `onUnavailable`), decided in the order
 * asked (on one key of limit 1 500, exactly the first 1 500 are granted). The deadline here is 500 ms, ten times
 * the default, so a busy machine cannot fail it; `npm run bench:redis` measures the same burst at 50 ms.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fixedWindow } from '../../src/index.ts';
import { isUnavailableAnswer, redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { clients } from './clients.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(() => server.stop());

for (const [name, connect] of Object.entries(clients)) {
  test(`${name}: 2 000 decisions in one tick, cold, are all Redis's and decided in the order asked`, async () => {
    const c = await connect(server.port);
    try {
      await c.command('FUNCTION', 'FLUSH');
      const store = redisStore({ client: c.client, timeoutMs: 500 });
      const hot = store.limiter(fixedWindow({ permitLimit: 1500, window: 600_000 }), { name: uniqueName() });
      const leases = await Promise.all(Array.from({ length: 2000 }, () => hot.tryAcquire()));
      assert.equal(leases.filter((l) => isUnavailableAnswer(l)).length, 0, 'none answered by onUnavailable');
      const firstRejected = leases.findIndex((l) => !l.granted);
      assert.equal(firstRejected, 1500, 'the first 1 500 asked are granted');
      assert.ok(leases.slice(1500).every((l) => l.reason === 'limit'));
      // 2 000 partitions, one decision each, in one tick.
      const spread = store.partitioned({
        name: uniqueName(),
        key: (k: string) => k,
        limiter: fixedWindow({ permitLimit: 1, window: 600_000 }),
      });
      const each = await Promise.all(Array.from({ length: 2000 }, (_, i) => spread.tryAcquire(`k${i}`)));
      assert.equal(each.filter((l) => l.granted && !isUnavailableAnswer(l)).length, 2000);
      assert.equal(store.unavailable, 0);
    } finally {
      await c.close();
    }
  });
}
