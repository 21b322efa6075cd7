import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientIp } from '../../src/http/client-ip.ts';
import { validatedKey } from '../../src/http/keys.ts';
import { chain, concurrency, fixedWindow, partitioned } from '../../src/index.ts';
import { type AppSpec, adapters, get, getFrom, userOf, withApp } from './apps.ts';

/**
 * The policy most applications need — N a minute per authenticated user, anonymous traffic per IP — written the
 * way an application writes it: an auth middleware sets the user, the key function reads it from the
 * framework's own request, on every adapter, over real sockets.
 */
const ip = clientIp();

function byUser(req: unknown): string {
  const user = userOf(req);
  if (user?.id === 'boom') throw new Error('session store down');
  return user === undefined ? ip(req as never) : `user:${user.id}`;
}

async function byUserAsync(req: unknown): Promise<string> {
  await new Promise((resolve) => setImmediate(resolve));
  return byUser(req);
}

const run = withApp;

for (const name of Object.keys(adapters)) {
  describe(`${name}: hooks see the framework's own request`, () => {
    for (const [kind, key] of [
      ['sync', byUser],
      ['async', byUserAsync],
    ] as const) {
      test(`per user with an IP fallback (${kind} key): separate budgets for alice, bob and two addresses`, async () => {
        const global = partitioned({ key, limiter: fixedWindow({ permitLimit: 2, window: '1m' }) });
        await run(name, { options: { global }, routes: [{ path: '/a' }], auth: true }, async (base) => {
          const alice = { 'x-user': 'alice' };
          assert.deepEqual(
            [
              (await get(`${base}/a`, alice)).status,
              (await get(`${base}/a`, alice)).status,
              (await get(`${base}/a`, alice)).status,
            ],
            [200, 200, 429],
          );
          assert.equal((await get(`${base}/a`, { 'x-user': 'bob' })).status, 200, 'bob has his own budget');
          const anonymous = [
            (await getFrom(`${base}/a`, '127.0.0.1')).status,
            (await getFrom(`${base}/a`, '127.0.0.1')).status,
            (await getFrom(`${base}/a`, '127.0.0.1')).status,
          ];
          assert.deepEqual(anonymous, [200, 200, 429]);
          assert.equal(
            (await getFrom(`${base}/a`, '127.0.0.2')).status,
            200,
            'another address, another budget',
          );
          // A key function that throws (or rejects) fails its request on the framework's error path; nothing
          // is charged and the server goes on.
          assert.equal((await get(`${base}/a`, { 'x-user': 'boom' })).status, 500);
          const bob = await get(`${base}/a`, { 'x-user': 'bob' });
          assert.equal(bob.status, 200);
          assert.match(bob.headers.get('ratelimit') ?? '', /^"global";r=0;/);
        });
      });
    }

    test('validatedKey with an async validate and an IP fallback', async () => {
      const sessions = new Set(['s-alice']);
      const key = validatedKey({
        from: (req) => userOf(req)?.id,
        validate: async (id) => sessions.has(`s-${id}`),
        fallback: ip,
      });
      const global = partitioned({ key, limiter: fixedWindow({ permitLimit: 1, window: '1m' }) });
      await run(name, { options: { global }, routes: [{ path: '/a' }], auth: true }, async (base) => {
        assert.equal((await get(`${base}/a`, { 'x-user': 'alice' })).status, 200);
        assert.equal((await get(`${base}/a`, { 'x-user': 'alice' })).status, 429);
        // mallory is not a session: she folds into her address's budget, which is still whole.
        assert.equal((await get(`${base}/a`, { 'x-user': 'mallory' })).status, 200);
        assert.equal((await get(`${base}/a`)).status, 429, 'the anonymous budget of 127.0.0.1 is spent');
      });
    });

    test('onRejected sees the framework request, as key functions do', async () => {
      const seen: unknown[] = [];
      const global = partitioned({ key: byUser, limiter: fixedWindow({ permitLimit: 1, window: '1m' }) });
      const onRejected = (ctx: { request: unknown }) => {
        seen.push(userOf(ctx.request)?.id);
      };
      await run(
        name,
        { options: { global, onRejected }, routes: [{ path: '/a' }], auth: true },
        async (base) => {
          await get(`${base}/a`, { 'x-user': 'carol' });
          assert.equal((await get(`${base}/a`, { 'x-user': 'carol' })).status, 429);
          assert.deepEqual(seen, ['carol']);
        },
      );
    });
  });

  describe(`${name}: each key function runs exactly once per request per limiter`, () => {
    function counting() {
      const calls = { perClient: 0, everyone: 0 };
      const perClient = partitioned({
        key: (req: unknown) => {
          calls.perClient++;
          return ip(req as never);
        },
        limiter: fixedWindow({ permitLimit: 2, window: '1m' }),
      });
      const everyone = partitioned({
        key: () => {
          calls.everyone++;
          return 'all';
        },
        limiter: fixedWindow({ permitLimit: 100, window: '1m' }),
      });
      return { calls, perClient, everyone };
    }

    for (const dryRun of [false, true]) {
      test(`granted and rejected, chain(perClient, everyone) as global${dryRun ? ', dry run' : ''}`, async () => {
        const { calls, perClient, everyone } = counting();
        const spec: AppSpec = {
          options: { global: chain(perClient, everyone), dryRun },
          routes: [{ path: '/a' }],
        };
        await run(name, spec, async (base) => {
          const seen: string[] = [];
          for (let i = 0; i < 5; i++) {
            const before = { ...calls };
            const response = await get(`${base}/a`);
            assert.match(response.headers.get('ratelimit-policy') ?? '', /pk=/);
            seen.push(
              `${response.status} +${calls.perClient - before.perClient}/+${calls.everyone - before.everyone}`,
            );
          }
          const status = dryRun ? [200, 200, 200, 200, 200] : [200, 200, 429, 429, 429];
          assert.deepEqual(
            seen,
            status.map((s) => `${s} +1/+1`),
          );
        });
      });
    }

    test('queued, global and policy', async () => {
      const { calls, perClient } = counting();
      const slots = partitioned({
        key: (req: unknown) => {
          calls.everyone++;
          return ip(req as never);
        },
        limiter: concurrency({ permitLimit: 1, queueLimit: 4 }),
      });
      const spec: AppSpec = {
        options: { global: perClient, policies: { slots } },
        routes: [{ path: '/slow', limit: 'slots' }],
      };
      await run(name, spec, async (base) => {
        const responses = await Promise.all([get(`${base}/slow?delay=50`), get(`${base}/slow?delay=50`)]);
        assert.deepEqual(
          responses.map((r) => r.status),
          [200, 200],
        );
        assert.deepEqual(calls, { perClient: 2, everyone: 2 });
      });
    });
  });
}
