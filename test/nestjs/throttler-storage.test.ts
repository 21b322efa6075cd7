/**
 * FloodgateThrottlerStorage, the drop-in storage for @nestjs/throttler: it answers every sequence of hits as the
 * default ThrottlerStorageService does (property, against the real class), and @nestjs/throttler's own
 * ThrottlerGuard in a real Nest application over real sockets keeps its documented behaviour on it: limit, ttl,
 * blockDuration, named throttlers, @SkipThrottle. Bounded: idle keys go without a timer, and never more than maxKeys.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { APP_GUARD } from '@nestjs/core';
import {
  SkipThrottle,
  ThrottlerGuard,
  ThrottlerModule,
  type ThrottlerOptions,
  type ThrottlerStorage,
  ThrottlerStorageService,
} from '@nestjs/throttler';
import fc from 'fast-check';
import { FloodgateThrottlerStorage } from '../../src/adapters/nestjs/index.ts';
import { clock, get } from '../koa/app.ts';
import { controller, platforms, start, using } from './app.ts';

// It is a ThrottlerStorage, as the module's `storage` option types it.
const _typed: ThrottlerStorage = new FloodgateThrottlerStorage();
void _typed;

describe('FloodgateThrottlerStorage', () => {
  test('answers every sequence of hits as @nestjs/throttler ThrottlerStorageService does', async () => {
    const op = fc.record({
      advance: fc.integer({ min: 0, max: 2500 }),
      key: fc.constantFrom('a', 'b', 'c'),
      name: fc.constantFrom('default', 'long'),
      ttl: fc.constantFrom(1000, 1500, 4000),
      limit: fc.integer({ min: 1, max: 4 }),
    });
    const blocks = fc.record({
      a: fc.constantFrom(0, 1000, 3000, 7000),
      b: fc.constantFrom(0, 1000, 3000, 7000),
      c: fc.constantFrom(0, 1000, 3000, 7000),
    });
    const realNow = Date.now;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(op, { maxLength: 60 }), fc.boolean(), blocks, async (ops, fixed, block) => {
          const c = clock(1_700_000_000_000);
          Date.now = () => c.t; // the reference reads Date.now()
          const reference = new ThrottlerStorageService();
          const ours = new FloodgateThrottlerStorage({ clock: c });
          try {
            for (const o of ops) {
              c.t += o.advance;
              // One ttl/limit per key, as a throttler has, or any per hit (a resolvable option). One blockDuration
              // per key: a key switching between 0 and a block would meet the default storage's stale block
              // flag, which its own timed sweep clears or not depending on when it last ran.
              const [ttl, limit] = fixed ? [1500, 2] : [o.ttl, o.limit];
              const blockDuration = block[o.key as 'a' | 'b' | 'c'];
              const key = `${o.name}:${o.key}`; // the guard's keys hold the throttler's name
              const want = await reference.increment(key, ttl, limit, blockDuration, o.name);
              const got = await ours.increment(key, ttl, limit, blockDuration, o.name);
              // Not blocked, the default storage's timeToBlockExpire is a negative number the guard never reads.
              assert.deepEqual(got, {
                ...want,
                timeToBlockExpire: want.isBlocked ? want.timeToBlockExpire : 0,
              });
            }
          } finally {
            reference.onApplicationShutdown();
          }
        }),
        { numRuns: 500 },
      );
    } finally {
      Date.now = realNow;
    }
  });

  test('idle keys are dropped as later calls pass, without a timer; never more than maxKeys', async () => {
    const c = clock();
    const storage = new FloodgateThrottlerStorage({ clock: c, maxKeys: 100 });
    for (let i = 0; i < 50; i++) await storage.increment(`k${i}`, 1000, 5, 1000, 'default');
    assert.equal(storage.size, 50);
    c.t += 1001; // all 50 idle now
    for (let i = 0; i < 50; i++) await storage.increment(`n${i}`, 1000, 5, 1000, 'default');
    assert.ok(storage.size <= 51, `idle keys shed as new ones arrive: ${storage.size}`);
    for (let i = 0; i < 500; i++) await storage.increment(`m${i}`, 60_000, 5, 1000, 'default');
    assert.equal(storage.size, 100);
  });

  test('a key under a running block is not dropped as idle', async () => {
    const c = clock();
    const storage = new FloodgateThrottlerStorage({ clock: c });
    for (let i = 0; i < 3; i++) await storage.increment('k', 1000, 2, 60_000, 'default');
    c.t += 5000; // hits and window over, block running
    for (let i = 0; i < 10; i++) await storage.increment(`n${i}`, 1000, 2, 60_000, 'default');
    const again = await storage.increment('k', 1000, 2, 60_000, 'default');
    assert.deepEqual([again.isBlocked, again.timeToBlockExpire], [true, 55]);
  });

  test('bad options: a TypeError/RangeError naming the option', () => {
    assert.throws(() => new FloodgateThrottlerStorage({ maxKeys: 0 }), /maxKeys/);
    assert.throws(() => new FloodgateThrottlerStorage({ maxkeys: 5 } as never), /did you mean "maxKeys"/);
    assert.throws(() => new FloodgateThrottlerStorage({ clock: Date.now } as never), /clock/);
  });
});

for (const platform of platforms) {
  describe(`@nestjs/throttler's ThrottlerGuard on FloodgateThrottlerStorage (${platform} platform)`, () => {
    const app = (throttlers: ThrottlerOptions[], storage: FloodgateThrottlerStorage) =>
      start(platform, {
        imports: [ThrottlerModule.forRoot({ throttlers, storage })],
        controllers: [
          controller({
            '/a': [() => 'ok'],
            '/skip': [() => 'ok', SkipThrottle() as never],
            '/skip-short': [() => 'ok', SkipThrottle({ short: true }) as never],
          }),
        ],
        providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
      });

    test('limit, ttl and blockDuration: blocked for blockDuration, not ttl; hits during the block not counted', async () => {
      const c = clock();
      const storage = new FloodgateThrottlerStorage({ clock: c });
      await using(app([{ ttl: 10_000, limit: 2, blockDuration: 60_000 }], storage), async ({ url }) => {
        const first = await get(`${url}/a`);
        assert.deepEqual(
          [first.status, first.headers.get('x-ratelimit-limit'), first.headers.get('x-ratelimit-remaining')],
          [200, '2', '1'],
        );
        assert.equal(first.headers.get('x-ratelimit-reset'), '10');
        assert.equal((await get(`${url}/a`)).status, 200);
        const third = await get(`${url}/a`);
        assert.equal(third.status, 429);
        assert.equal(third.headers.get('retry-after'), '60');
        assert.match(third.body, /ThrottlerException: Too Many Requests/);
        c.t += 11_000; // the hits expired; the block has not
        const during = await get(`${url}/a`);
        assert.deepEqual([during.status, during.headers.get('retry-after')], [429, '49']);
        c.t = 60_000; // the block is over: counting starts again
        const after = await get(`${url}/a`);
        assert.deepEqual([after.status, after.headers.get('x-ratelimit-remaining')], [200, '1']);
        assert.equal((await get(`${url}/a`)).status, 200);
        assert.equal((await get(`${url}/a`)).status, 429);
      });
    });

    test('ttl: each hit counts for ttl, then the key is free again (blockDuration defaults to ttl)', async () => {
      const c = clock();
      const storage = new FloodgateThrottlerStorage({ clock: c });
      await using(app([{ ttl: 2000, limit: 1 }], storage), async ({ url }) => {
        assert.equal((await get(`${url}/a`)).status, 200);
        const second = await get(`${url}/a`);
        assert.deepEqual([second.status, second.headers.get('retry-after')], [429, '2']);
        c.t += 2000;
        assert.equal((await get(`${url}/a`)).status, 200);
      });
    });

    test('named throttlers: each counts, the first to refuse answers with its own Retry-After-<name>', async () => {
      const c = clock();
      const storage = new FloodgateThrottlerStorage({ clock: c });
      const throttlers = [
        { name: 'short', ttl: 1000, limit: 1 },
        { name: 'long', ttl: 10_000, limit: 3 },
      ];
      await using(app(throttlers, storage), async ({ url }) => {
        const first = await get(`${url}/a`);
        assert.deepEqual(
          [first.headers.get('x-ratelimit-remaining-short'), first.headers.get('x-ratelimit-remaining-long')],
          ['0', '2'],
        );
        const second = await get(`${url}/a`);
        assert.deepEqual([second.status, second.headers.get('retry-after-short')], [429, '1']);
        c.t += 1500;
        assert.equal((await get(`${url}/a`)).status, 200);
        c.t += 1500;
        assert.equal((await get(`${url}/a`)).status, 200);
        c.t += 1500; // short is free; long has counted 3 in 10 s
        const fifth = await get(`${url}/a`);
        assert.deepEqual([fifth.status, fifth.headers.get('retry-after-long')], [429, '10']);
      });
    });

    test('@SkipThrottle() skips the default throttler, @SkipThrottle({ short: true }) the one named short', async () => {
      const c = clock();
      const storage = new FloodgateThrottlerStorage({ clock: c });
      const throttlers = [
        { name: 'default', ttl: 10_000, limit: 1 },
        { name: 'short', ttl: 1000, limit: 1 },
      ];
      await using(app(throttlers, storage), async ({ url }) => {
        const skipped = await get(`${url}/skip`);
        assert.deepEqual(
          [
            skipped.status,
            skipped.headers.get('x-ratelimit-limit'),
            skipped.headers.get('x-ratelimit-limit-short'),
          ],
          [200, null, '1'],
        );
        const again = await get(`${url}/skip`);
        assert.deepEqual([again.status, again.headers.get('retry-after-short')], [429, '1']);
        c.t += 1000; // short is free again; default never counted /skip
        assert.equal((await get(`${url}/skip`)).status, 200);
        const first = await get(`${url}/skip-short`);
        assert.deepEqual(
          [
            first.status,
            first.headers.get('x-ratelimit-limit'),
            first.headers.get('x-ratelimit-limit-short'),
          ],
          [200, '1', null],
        );
        const second = await get(`${url}/skip-short`);
        assert.deepEqual(
          [second.status, second.headers.get('retry-after'), second.headers.has('retry-after-short')],
          [429, '10', false],
        );
      });
    });
  });
}
