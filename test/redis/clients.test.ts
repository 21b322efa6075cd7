/** Every client (ioredis, iovalkey, node-redis, valkey-glide): the same decisions, scripts reloaded after SCRIPT FLUSH, chains. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { GlideClient, GlideClusterClient } from '@valkey/valkey-glide';
import type { Redis } from 'ioredis';
import { adaptiveConcurrency, fixedWindow, tokenBucket } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { RedisServer } from '../support/redis-server.ts';
import { clients } from './clients.ts';
import { uniqueName } from './twin.ts';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(() => server.stop());

for (const [name, connect] of Object.entries(clients)) {
  test(`${name}: decides, reloads its code after SCRIPT FLUSH and FUNCTION FLUSH, runs chains in one call`, async () => {
    const c = await connect(server.port);
    const errors: Error[] = [];
    const store = redisStore({ client: c.client, onError: (e) => errors.push(e), timeoutMs: 2000 });
    const limiter = store.limiter(fixedWindow({ permitLimit: 2, window: 60_000 }), { name: uniqueName() });
    assert.deepEqual(
      (await Promise.all([1, 2, 3].map(() => limiter.tryAcquire()))).map((l) => l.granted),
      [true, true, false],
    );
    assert.equal(((await c.command('FUNCTION', 'LIST')) as unknown[]).length, 1, 'one library loaded');
    await c.command('SCRIPT', 'FLUSH');
    await c.command('FUNCTION', 'FLUSH');
    const after = await limiter.tryAcquire();
    assert.equal(after.granted, false);
    assert.equal(after.reason, 'limit', 'answered by Redis, not by onUnavailable');
    assert.ok(after.retryAfterMs! > 59_000, 'after.retryAfterMs! > 59_000');
    assert.equal(((await c.command('FUNCTION', 'LIST')) as unknown[]).length, 1, 'the library was reloaded');
    const bucket = store.limiter(tokenBucket({ tokenLimit: 3, tokensPerPeriod: 1, period: 60_000 }), {
      name: uniqueName(),
    });
    const both = store.chain(
      bucket,
      store.limiter(fixedWindow({ permitLimit: 5, window: 60_000 }), { name: uniqueName() }),
    );
    assert.equal((await both.tryAcquire(3)).granted, true);
    const rejected = await both.tryAcquire(1);
    assert.equal(rejected.granted, false);
    assert.equal(rejected.source, bucket);
    assert.equal((await both.statistics()).available, 0);
    assert.deepEqual(errors, []);
    assert.equal(store.unavailable, 0);
    await c.close();
  });
}

for (const [name, connect] of Object.entries(clients)) {
  test(`${name}: a user whose ACL forbids Functions decides by scripts, EVAL after SCRIPT FLUSH`, async () => {
    const admin = await connect(server.port);
    const user = uniqueName();
    await admin.command('ACL', 'SETUSER', user, 'on', `>${user}`, '~*', '+@all', '-fcall', '-function');
    const c = await connect(server.port, { username: user, password: user });
    const errors: Error[] = [];
    const store = redisStore({ client: c.client, timeoutMs: 2000, onError: (e) => errors.push(e) });
    const limiter = store.limiter(fixedWindow({ permitLimit: 2, window: 60_000 }), { name: uniqueName() });
    const first = await limiter.tryAcquire();
    await admin.command('SCRIPT', 'FLUSH');
    const rest = [await limiter.tryAcquire(), await limiter.tryAcquire()];
    assert.deepEqual(
      [first, ...rest].map((l) => [l.granted, l.reason]),
      [
        [true, undefined],
        [true, undefined],
        [false, 'limit'],
      ],
    );
    assert.deepEqual(errors, []);
    assert.equal(store.unavailable, 0, 'no decision fell back to onUnavailable');
    await admin.command('ACL', 'DELUSER', user);
    await c.close();
    await admin.close();
  });
}

test('a server without Functions (Redis 6) or an ACL that forbids them: scripts, decided alike', async () => {
  for (const refusal of [
    "ERR unknown command 'FCALL', with args beginning with: ",
    'NOPERM no FCALL for you',
  ]) {
    const c = await clients.ioredis(server.port);
    const redis = c.client as Redis;
    const sent: string[] = [];
    const old = new Proxy(redis, {
      get(target, property) {
        if (property === 'call') {
          return (name: string, ...args: string[]) => {
            const command = name.toUpperCase();
            sent.push(command);
            return command === 'FCALL' || command === 'FUNCTION'
              ? Promise.reject(new Error(refusal))
              : target.call(name, ...args);
          };
        }
        const value = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const store = redisStore({ client: old as never, timeoutMs: 2000, onUnavailable: 'fail-closed' });
    const limiter = store.limiter(fixedWindow({ permitLimit: 2, window: 60_000 }), { name: uniqueName() });
    const leases = [];
    for (let i = 0; i < 3; i++) leases.push(await limiter.tryAcquire());
    assert.deepEqual(
      leases.map((l) => [l.granted, l.reason]),
      [
        [true, undefined],
        [true, undefined],
        [false, 'limit'],
      ],
      refusal,
    );
    assert.deepEqual(sent, ['FCALL'], 'asked for FCALL once, then kept to scripts');
    assert.equal(store.unavailable, 0, 'no decision fell back to onUnavailable');
    await c.close();
  }
});

test('bad options are TypeErrors naming the option and the value', () => {
  assert.throws(
    () => redisStore({ client: {} as never }),
    /client must be an ioredis or iovalkey client .*valkey-glide GlideClient; .*neither evalsha, evalSha nor customCommand/,
  );
  assert.throws(() => redisStore(null as never), /options must be an object; got null/);
  // valkey-glide's Cluster client, told apart from its GlideClient as the store does it.
  assert.equal(typeof GlideClusterClient.prototype.fcallWithRoute, 'function');
  assert.equal('fcallWithRoute' in GlideClient.prototype, false);
  const glideCluster = Object.create(GlideClusterClient.prototype);
  assert.throws(
    () => redisStore({ client: glideCluster }),
    (e) => e instanceof TypeError && /GlideClusterClient is not supported: .*slot migration/.test(e.message),
  );
  const client = { evalsha() {}, eval() {} } as never;
  assert.throws(() => redisStore({ client, timeoutMs: -1 }), /timeoutMs must be a positive duration.*got -1/);
  assert.throws(
    () => redisStore({ client, onUnavailable: 'open' as never }),
    /onUnavailable must be .*got "open"/,
  );
  assert.throws(
    () => redisStore({ client, prefix: 'a{b}' }),
    /prefix must be a string without braces; got "a\{b\}"/,
  );
  const store = redisStore({ client });
  assert.throws(() => store.limiter(fixedWindow({ permitLimit: 1, window: 1 }), {} as never), /name must be/);
  assert.throws(() => store.limiter({} as never, { name: 'x' }), /store.limiter must be a limiter/);
  assert.throws(
    () =>
      store.partitioned({
        name: 'p',
        key: 'ip' as never,
        limiter: fixedWindow({ permitLimit: 1, window: 1 }),
      }),
    /key must be a function/,
  );
  assert.throws(() => store.chain(), /needs at least one limiter/);
});

test('a spec whose algorithm Redis has no script for is a TypeError at construction, naming it', async () => {
  const store = redisStore({ client: { evalsha() {}, eval() {} } as never });
  const fw = fixedWindow({ permitLimit: 1, window: 1000 });
  // A user's own algorithm, even one that calls itself a fixed window, is not floodgate's fixed window.
  const mine = {
    algorithm: {
      kind: 'fixed-window',
      width: 2,
      limit: 1,
      timeBased: true,
      windowMs: 1000,
      signature: 'mine',
    },
    options: fw.options,
    signature: 'mine',
  } as never;
  const cannot = /a Redis store cannot run algorithm "fixed-window"; .*fixedWindow/;
  assert.throws(
    () => store.limiter(mine, { name: 'x' }),
    (e) => e instanceof TypeError && /^store.limiter/.test(e.message) && cannot.test(e.message),
  );
  assert.throws(() => store.partitioned({ name: 'p', key: (k: string) => k, limiter: mine }), cannot);
  // Adaptive concurrency learns its limit in one process: Redis would run it as a fixed one.
  assert.throws(
    () => store.limiter(adaptiveConcurrency({}), { name: 'a' }),
    /store.limiter: a Redis store cannot run algorithm "concurrency" \(adaptiveConcurrency/,
  );
  // Chosen per key, it is checked when the key is first seen.
  const tiers = store.partitioned({ name: 't', key: (k: string) => k, limiter: () => mine });
  await assert.rejects(tiers.tryAcquire('k'), /store.partitioned: limiter\("k"\): a Redis store cannot run/);
});

test('tiers per key, and the optional blocked cache answers a rejected key locally until it may pass', async () => {
  const c = await clients.ioredis(server.port);
  let calls = 0;
  const counting = {
    evalsha: (...args: never[]) => {
      calls++;
      return (c.client as unknown as { evalsha: (...a: never[]) => Promise<unknown> }).evalsha(...args);
    },
    eval: (...args: never[]) =>
      (c.client as unknown as { eval: (...a: never[]) => Promise<unknown> }).eval(...args),
  };
  const store = redisStore({ client: counting as never, cacheBlocked: true, timeoutMs: 2000 });
  const tiers = store.partitioned({
    name: uniqueName(),
    key: (user: string) => user,
    // Long enough that a busy machine does not see the window roll between two of these decisions.
    limiter: (user) => fixedWindow({ permitLimit: user.startsWith('vip') ? 3 : 1, window: 1500 }),
  });
  assert.deepEqual(
    await Promise.all(['vip1', 'vip1', 'vip1', 'vip1'].map((u) => tiers.tryAcquire(u))).then((l) =>
      l.map((x) => x.granted),
    ),
    [true, true, true, false],
  );
  assert.equal((await tiers.tryAcquire('bob')).granted, true);
  const rejected = await tiers.tryAcquire('bob');
  assert.equal(rejected.granted, false);
  const before = calls;
  const cached = await tiers.tryAcquire('bob');
  assert.equal(cached.granted, false);
  assert.equal(calls, before, 'answered without Redis');
  assert.ok(cached.retryAfterMs! > 0 && cached.retryAfterMs! <= rejected.retryAfterMs!, 'the wait left');
  await new Promise((r) => setTimeout(r, rejected.retryAfterMs! + 20));
  assert.equal((await tiers.tryAcquire('bob')).granted, true, 'asks Redis again once the time has passed');
  await c.close();
});

test('keys expire on their own once their state is back to full (TTL = time to full + 1 s)', async () => {
  const c = await clients.ioredis(server.port);
  const store = redisStore({ client: c.client, timeoutMs: 2000, prefix: 'ttl:' });
  const window = store.limiter(fixedWindow({ permitLimit: 5, window: 300 }), { name: uniqueName() });
  const bucket = store.limiter(tokenBucket({ tokenLimit: 4, tokensPerPeriod: 1, period: 200 }), {
    name: uniqueName(),
  });
  const started = performance.now();
  await window.tryAcquire();
  await window.tryAcquire(); // same window: the expiry stands
  await bucket.tryAcquire(3); // 3 periods to full
  const ttls = new Map<string, number>();
  for (const key of (await c.command('KEYS', 'ttl:*')) as string[]) {
    ttls.set(key, Number(await c.command('PTTL', key)));
  }
  // A busy machine may take a while between the decisions and the PTTL reads: the TTLs may have run down by
  // that much (plus a little for the clocks), never more, and never above what was set.
  const elapsed = performance.now() - started + 5;
  const windowTtl = ttls.get(`ttl:{${window.name}}`)!;
  const bucketTtl = ttls.get(`ttl:{${bucket.name}}`)!;
  assert.ok(windowTtl > 1300 - elapsed && windowTtl <= 1300, `window key TTL ${windowTtl} (${elapsed} ms)`);
  assert.ok(bucketTtl > 1600 - elapsed && bucketTtl <= 1600, `bucket key TTL ${bucketTtl} (${elapsed} ms)`);
  await new Promise((r) => setTimeout(r, 1700));
  assert.deepEqual(await c.command('KEYS', 'ttl:*'), [], 'idle keys are gone');
  await c.close();
});

test("Redis's clock: the time a window has left follows TIME to the millisecond, across a second", async () => {
  const c = await clients.ioredis(server.port);
  const store = redisStore({ client: c.client, timeoutMs: 2000 });
  const window = 60_000;
  const limiter = store.limiter(fixedWindow({ permitLimit: 10, window }), { name: uniqueName() });
  const time = async () => {
    const [seconds, micros] = (await c.command('TIME')) as [string, string];
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };
  const before1 = await time();
  assert.equal((await limiter.tryAcquire()).resetAfterMs, window, 'the window starts at the first request');
  const after1 = await time();
  await new Promise((r) => setTimeout(r, 1050)); // the seconds' digits change too
  const before2 = await time();
  const second = await limiter.tryAcquire();
  const after2 = await time();
  // The window started between before1 and after1, and the second request was decided between before2 and after2.
  const elapsed = window - second.resetAfterMs!;
  assert.ok(
    elapsed >= before2 - after1 && elapsed <= after2 - before1,
    `${elapsed} ms between the decisions, TIME says ${before2 - after1}–${after2 - before1}`,
  );
  await c.close();
});
