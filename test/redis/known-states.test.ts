/**
 * As a Function, the decision code decides on the state it last knew under a key and writes the result with
 * `SET … GET`, checking that Redis had that state (docs/redis.md, How it decides). These tests change a key
 * behind its back — replaced by another limiter's state, deleted — and require every answer, and what Redis
 * holds after, to be what deciding on Redis's own state gives: the write of a wrong guess undone (its expiry
 * kept), lone members and chains alike, with both clients.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fixedWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { clients } from './clients.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(() => server.stop());

const keyOf = (name: string) => `floodgate:{${name}}`;

for (const [name, connect] of Object.entries(clients)) {
  test(`${name}: a lone fixed window decides on Redis's state when the key was replaced or deleted`, async (t) => {
    const c = await connect(server.port);
    t.after(() => c.close());
    const store = redisStore({ client: c.client, timeoutMs: 2000, onUnavailable: 'fail-closed' });
    const spec = fixedWindow({ permitLimit: 5, window: 60_000 });
    const a = store.limiter(spec, { name: uniqueName() });
    const b = store.limiter(spec, { name: uniqueName() });
    assert.equal((await a.tryAcquire()).remaining, 4, 'a: one taken, and known');
    for (let i = 0; i < 5; i++) assert.equal((await b.tryAcquire()).granted, true);
    // a now holds b's state: a full window.
    await c.command('COPY', keyOf(b.name), keyOf(a.name), 'REPLACE');
    const ttlBefore = Number(await c.command('PTTL', keyOf(a.name)));
    const rejected = await a.tryAcquire();
    assert.equal(rejected.granted, false, "decided on Redis's state (5 of 5), not the known one (1 of 5)");
    assert.equal(rejected.reason, 'limit');
    assert.equal((await a.statistics()).available, 0, 'the write made on the known state was undone');
    const ttlAfter = Number(await c.command('PTTL', keyOf(a.name)));
    assert.ok(ttlAfter > 0 && ttlAfter <= ttlBefore, `the expiry stands (${ttlBefore} -> ${ttlAfter} ms)`);
    // Deleted (as if expired): a fresh window, not the known one.
    await c.command('DEL', keyOf(a.name));
    assert.equal((await a.tryAcquire()).remaining, 4, 'a fresh window after the key was deleted');
    assert.equal((await a.tryAcquire()).remaining, 3, 'and known again');
  });

  test(`${name}: a chain decides on Redis's states when a member's key was replaced; the others are left as they were`, async (t) => {
    const c = await connect(server.port);
    t.after(() => c.close());
    const store = redisStore({ client: c.client, timeoutMs: 2000, onUnavailable: 'fail-closed' });
    const bucketSpec = tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: 60_000 });
    const window = store.limiter(fixedWindow({ permitLimit: 10, window: 60_000 }), { name: uniqueName() });
    const bucket = store.limiter(bucketSpec, { name: uniqueName() });
    const empty = store.limiter(bucketSpec, { name: uniqueName() });
    const both = store.chain(window, bucket);
    assert.equal((await both.tryAcquire()).granted, true, 'both known: window 1 of 10, bucket 2 of 3 left');
    assert.equal((await empty.tryAcquire(3)).granted, true);
    await c.command('COPY', keyOf(empty.name), keyOf(bucket.name), 'REPLACE');
    const refused = await both.tryAcquire();
    assert.equal(refused.granted, false, 'the bucket is empty in Redis, whatever was known');
    assert.equal(refused.reason, 'limit');
    assert.equal(
      (await window.statistics()).available,
      9,
      "the window's write on the known states was undone",
    );
    assert.equal((await bucket.statistics()).available, 0);
    // The window alone still decides on its own (known, and right) state.
    assert.equal((await window.tryAcquire()).remaining, 8);
    await c.command('DEL', keyOf(bucket.name));
    const fresh = await both.tryAcquire();
    assert.equal(fresh.granted, true, 'a fresh bucket after its key was deleted');
    assert.equal((await bucket.statistics()).available, 2);
    assert.equal((await window.statistics()).available, 7);
  });
}
