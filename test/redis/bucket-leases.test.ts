/**
 * A leased token bucket (`leases: true`, issue 26) on a real redis-server, one process, on a hand-moved clock:
 * the Lua take and give-back answer what the reference model (`BucketLeaseModel`) answers; a leased bucket
 * decides from its batch with few commands and rejects locally until the retry time; batches of all holders stay
 * within the reserve; refunds go to Redis; a probe takes nothing; the holders' key shares the bucket's slot.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { TokenBucket } from '../../src/algorithms/token-bucket.ts';
import { tokenBucket } from '../../src/index.ts';
import type { LimiterSpec } from '../../src/limiters/rate-limiter.ts';
import { BUCKET_HOLD_MS } from '../../src/redis/batch.ts';
import type { Engine } from '../../src/redis/engine.ts';
import { type RedisStore, redisStore } from '../../src/redis/index.ts';
import { encodeRequest } from '../../src/redis/protocol.ts';
import { keySlot } from '../../src/redis/slot.ts';
import { RedisServer } from '../support/redis-server.ts';
import { BucketLeaseModel, type TakeReply } from './lease-model.ts';
import { type TestClock, testClock, uniqueName } from './twin.ts';

let server: RedisServer;
let client: Redis;
let clock: TestClock;
let store: RedisStore;
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  clock = testClock(0);
  store = redisStore({ client, clock, timeoutMs: 5000 });
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

const engineOf = (s: RedisStore) => (s as unknown as { context: { engine: Engine } }).context.engine;
const holdersOf = (key: string) => `${key.slice(0, key.indexOf('{'))}\n${key.slice(key.indexOf('{'))}`;

/** A bucket's lease op, sent as the store sends it: the bucket, then its holders. */
async function luaOp(
  key: string,
  spec: LimiterSpec,
  now: number,
  holder: string,
  back: number,
  take?: { want: number; need: number },
): Promise<TakeReply | undefined> {
  const engine = engineOf(store);
  const text = engine.specOf(spec);
  const args: string[] = [];
  encodeRequest(args, take ? 'l' : 'g', take ? take.want : back, String(now), [
    { key, spec: text, origin: '', blocked: false, lease: take ? String(take.need) : '0' },
    { key: holdersOf(key), spec: text, origin: '', blocked: false, lease: `${holder}:${back}` },
  ]);
  const reply = await engine.dispatcher.request([key, holdersOf(key)], args);
  if (!take) return undefined;
  const f = reply.split(',');
  if (f[0] === '1') {
    return {
      granted: true,
      permits: Number(f[1]),
      remaining: Number(f[2]),
      resetMs: Number(f[3]),
      mark: f[4],
      endMs: Number(f[5]),
    };
  }
  return { granted: false, retryMs: Number(f[2]) };
}

for (const replenishment of ['stepped', 'continuous'] as const) {
  test(`${replenishment}: the Lua take and give-back answer what the model answers, through any sequence`, async () => {
    const op = fc.record({
      advance: fc.integer({ min: 0, max: 700 }),
      holder: fc.constantFrom('a', 'b', 'c'),
      back: fc.integer({ min: 0, max: 12 }),
      take: fc.option(
        fc.record({ want: fc.integer({ min: 1, max: 40 }), need: fc.integer({ min: 1, max: 4 }) }),
      ),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 40 }), async (ops) => {
        const key = `floodgate:{${uniqueName()}}`;
        const spec = tokenBucket({ tokenLimit: 400, tokensPerPeriod: 40, period: 100, replenishment });
        const model = new BucketLeaseModel(new TokenBucket(400, 40, 100, replenishment), 4, BUCKET_HOLD_MS);
        let now = 0;
        for (const o of ops) {
          now += o.advance;
          const take = o.take ?? undefined;
          const lua = await luaOp(key, spec, now, o.holder, o.back, take);
          const expected = model.op(now, o.holder, o.back, take);
          if (expected?.granted)
            assert.deepEqual(lua, { ...expected, resetMs: lua!.granted && lua!.resetMs });
          else assert.deepEqual(lua, expected);
        }
      }),
      { numRuns: 40 },
    );
  });
}

test('a leased bucket decides from its batch with few commands, then rejects locally until the retry time', async () => {
  clock.set(0);
  const name = uniqueName();
  const limiter = store.limiter(tokenBucket({ tokenLimit: 1000, tokensPerPeriod: 100, period: 1000 }), {
    name,
    leases: true,
  });
  const before = await calls();
  let granted = 0;
  for (let i = 0; i < 1000; i++) {
    clock.advance(0.5);
    if ((await limiter.tryAcquire()).granted) granted++;
  }
  const spent = (await calls()) - before;
  assert.equal(granted, 1000, 'the whole bucket, on this one process');
  // Batches of the request plus the reserve (10): about one command per 11 decisions.
  assert.ok(spent <= 1000 / 11 + 10, `${spent} script calls for 1000 decisions`);
  const first = await limiter.tryAcquire();
  assert.equal(first.granted, false);
  assert.equal(first.retryAfterMs, 500, 'the next refill, at 1000 ms');
  const afterReject = await calls();
  clock.advance(200);
  const cached = await limiter.tryAcquire();
  assert.equal(cached.retryAfterMs, 300);
  assert.equal(await calls(), afterReject, 'a cached denial costs no command');
  clock.advance(300);
  assert.equal((await limiter.tryAcquire()).granted, true, 'refilled');
});

test('two stores on one bucket: over any span, at most the limit + refills + the reserve; the holders stay within it', async () => {
  clock.set(0);
  const otherClient = new Redis({ port: server.port });
  const other = redisStore({ client: otherClient, clock, timeoutMs: 5000 });
  const name = uniqueName();
  const spec = () => tokenBucket({ tokenLimit: 500, tokensPerPeriod: 50, period: 100 });
  const a = store.limiter(spec(), { name, leases: true });
  const b = other.limiter(spec(), { name, leases: true });
  const holders = holdersOf(`floodgate:{${name}}`);
  const grants: number[] = [];
  let most = 0;
  for (let i = 0; i < 600; i++) {
    clock.set(i * 2);
    const [x, y] = await Promise.all([a.tryAcquire(), b.tryAcquire(2)]);
    if (x.granted) grants.push(clock.now());
    if (y.granted) grants.push(clock.now(), clock.now());
    const records = Object.values(await client.hgetall(holders)).map((v) => Number(v.split(':')[0]));
    most = Math.max(
      most,
      records.reduce((s, n) => s + n, 0),
    );
  }
  assert.ok(most <= 5, `the holders' records held ${most} > the reserve 5 together`);
  assert.ok(most > 0, 'batches were leased');
  // Every span [s, e] between grants: the stepped bucket refills 50 at each 100 ms boundary after 0.
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < grants.length; i++) {
    for (let j = i; j < grants.length; j++) {
      const refills = 50 * (Math.floor(grants[j] / 100) - Math.floor(grants[i] / 100));
      worst = Math.max(worst, j - i + 1 - (500 + refills));
    }
  }
  assert.ok(worst <= 5, `overshoot ${worst} > the reserve 5`);
  otherClient.disconnect();
});

test("a crashed holder's reserve comes back after its batch's life; its void batch handed back late is forfeit", async () => {
  const key = `floodgate:{${uniqueName()}}`;
  const spec = tokenBucket({ tokenLimit: 1000, tokensPerPeriod: 1, period: 1000 });
  const take = (now: number, holder: string, back = 0) =>
    luaOp(key, spec, now, holder, back, { want: 100, need: 1 }) as Promise<
      Extract<TakeReply, { granted: true }>
    >;
  assert.equal((await take(0, 'dead')).permits, 11, 'the request and the whole reserve (10)');
  assert.equal((await take(1, 'alive')).permits, 1, 'the reserve is held: the request alone');
  assert.equal((await take(BUCKET_HOLD_MS, 'alive')).permits, 11, "the dead holder's record expired");
  const before = (await take(BUCKET_HOLD_MS + 1, 'x')).remaining;
  await luaOp(key, spec, BUCKET_HOLD_MS + 2, 'dead', 10);
  const afterBack = (await take(BUCKET_HOLD_MS + 3, 'y')).remaining;
  assert.equal(afterBack, before - 1, 'nothing credited for the void batch');
});

test('a refunded leased grant goes back to Redis; a probe takes nothing', async () => {
  clock.set(0);
  const name = uniqueName();
  const limiter = store.limiter(tokenBucket({ tokenLimit: 200, tokensPerPeriod: 1, period: 100_000 }), {
    name,
    leases: true,
  });
  const first = await limiter.tryAcquire();
  assert.ok(first.granted);
  const stateTokens = async () =>
    (
      (await client.eval(
        "return { cmsgpack.unpack(redis.call('GET', KEYS[1])) }",
        1,
        `floodgate:{${name}}`,
      )) as number[]
    )[1];
  // A cold key's first take is its request alone.
  assert.equal(await stateTokens(), 199);
  first.refund();
  // Sent at the tick's end, on the same connection as the read that follows.
  await new Promise((r) => setImmediate(r));
  assert.equal(await stateTokens(), 200, 'the refund reached Redis');
  const probe = await limiter.tryAcquire(0);
  assert.ok(probe.granted);
  assert.equal(await stateTokens(), 200, 'a probe takes nothing');
});

test("the holders' key shares the bucket's Cluster slot and expires", async () => {
  for (const key of ['floodgate:{a}', 'floodgate:{t}name:part', 'p:{x}y}:n']) {
    assert.equal(keySlot(holdersOf(key)), keySlot(key));
  }
  clock.set(0);
  const name = uniqueName();
  const limiter = store.limiter(tokenBucket({ tokenLimit: 1000, tokensPerPeriod: 100, period: 1000 }), {
    name,
    leases: true,
  });
  for (let i = 0; i < 20; i++) await limiter.tryAcquire();
  const holders = holdersOf(`floodgate:{${name}}`);
  assert.equal(await client.type(holders), 'hash');
  const ttl = await client.pttl(holders);
  assert.ok(ttl > 0 && ttl <= BUCKET_HOLD_MS + 600_000, `holders' TTL ${ttl}`);
});

test('onUnavailable answers a take Redis cannot serve; the insurance limiter decides it', async () => {
  const broken = new Redis({ port: server.port, lazyConnect: true, enableOfflineQueue: false });
  const failing = redisStore({
    client: broken,
    clock,
    timeoutMs: 50,
    onUnavailable: tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: 60_000, clock }),
    onError: () => {},
  });
  const limiter = failing.limiter(tokenBucket({ tokenLimit: 100, tokensPerPeriod: 1, period: 1000 }), {
    name: uniqueName(),
    leases: true,
  });
  assert.equal((await limiter.tryAcquire()).granted, true, "the insurance bucket's one token");
  const second = await limiter.tryAcquire();
  assert.equal(second.granted, false);
  assert.equal(failing.unavailable, 2);
  broken.disconnect();
});
