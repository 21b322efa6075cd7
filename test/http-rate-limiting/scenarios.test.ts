import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientIp } from '../../src/http/client-ip.ts';
import { headerValue } from '../../src/http/keys.ts';
import { concurrency, fixedWindow, partitioned, slidingWindow, tokenBucket } from '../../src/index.ts';
import { type AppSpec, adapters, get } from './apps.ts';

/** A clock the test moves by hand (no queue on these limiters, so no timers to move along). */
function clock(start = 0) {
  return {
    t: start,
    now() {
      return this.t;
    },
  };
}

type Scenario = {
  name: string;
  spec: () => { spec: AppSpec; check: (base: string) => Promise<void> };
};

const byClient = clientIp();
const boom = headerValue('x-boom');

const scenarios: Scenario[] = [
  {
    name: 'default rejection: 429, short text body, Retry-After and draft-10 fields, raw key never sent',
    spec: () => {
      const c = clock();
      const global = partitioned({
        key: byClient,
        limiter: fixedWindow({ permitLimit: 2, window: '10s', clock: c }),
      });
      return {
        spec: { options: { global }, routes: [{ path: '/a' }] },
        check: async (base) => {
          const first = await get(`${base}/a`);
          assert.equal(first.status, 200);
          assert.match(first.headers.get('ratelimit-policy')!, /^"global";q=2;w=10;pk=:[A-Za-z0-9+/]{16}:$/);
          assert.match(first.headers.get('ratelimit')!, /^"global";r=1;t=10;pk=:[A-Za-z0-9+/]{16}:$/);
          assert.equal(first.headers.get('retry-after'), null);
          assert.equal((await get(`${base}/a`)).status, 200);
          c.t = 4_000;
          const third = await get(`${base}/a`);
          assert.equal(third.status, 429);
          assert.equal(third.headers.get('retry-after'), '6');
          assert.match(third.headers.get('content-type')!, /^text\/plain/);
          assert.equal(third.body, 'Too many requests. Try again in 6 seconds.');
          assert.match(third.headers.get('ratelimit')!, /^"global";r=0;t=6;pk=/);
          for (const [, value] of third.headers) assert.ok(!value.includes('127.0.0.1'), 'raw key leaked');
          c.t = 10_000;
          assert.equal((await get(`${base}/a`)).status, 200);
        },
      };
    },
  },
  {
    name: 'an endpoint rejection costs no global permit (global + named policy are one chain)',
    spec: () => {
      const c = clock();
      const global = partitioned({
        key: byClient,
        limiter: fixedWindow({ permitLimit: 5, window: '10s', clock: c }),
      });
      const tight = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      return {
        spec: {
          options: { global, policies: { tight } },
          routes: [{ path: '/tight', limit: 'tight' }, { path: '/free' }],
        },
        check: async (base) => {
          assert.equal((await get(`${base}/tight`)).status, 200);
          for (let i = 0; i < 3; i++) {
            const rejected = await get(`${base}/tight`);
            assert.equal(rejected.status, 429);
            assert.match(
              rejected.headers.get('ratelimit-policy')!,
              /"global";q=5;w=10;pk=:[^:]+:, "tight";q=1;w=10$/,
            );
          }
          const free = await get(`${base}/free`);
          assert.equal(free.status, 200);
          assert.match(
            free.headers.get('ratelimit')!,
            /^"global";r=3;t=10;pk=/,
            'global spent 2: one per admitted request',
          );
        },
      };
    },
  },
  {
    name: 'the same chain whatever the registration order (routes before the middleware)',
    spec: () => {
      const c = clock();
      const global = fixedWindow({ permitLimit: 3, window: '10s', clock: c });
      const tight = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      return {
        spec: {
          options: { global, policies: { tight } },
          routes: [{ path: '/tight', limit: 'tight' }],
          routesFirst: true,
        },
        check: async (base) => {
          assert.equal((await get(`${base}/tight`)).status, 200);
          assert.equal((await get(`${base}/tight`)).status, 429);
          assert.equal((await get(`${base}/tight`)).status, 429);
          assert.equal(global.statistics().available, 2, 'one global permit spent, none for the rejections');
          assert.equal(tight.statistics().rejected, 2);
        },
      };
    },
  },
  {
    name: 'a disabled route is not limited, not even by the global limiter, and sends no fields',
    spec: () => {
      const c = clock();
      const global = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      return {
        spec: { options: { global }, routes: [{ path: '/a' }, { path: '/off', limit: false }] },
        check: async (base) => {
          assert.equal((await get(`${base}/a`)).status, 200);
          assert.equal((await get(`${base}/a`)).status, 429);
          for (let i = 0; i < 3; i++) {
            const off = await get(`${base}/off`);
            assert.equal(off.status, 200);
            assert.equal(off.headers.get('ratelimit'), null);
          }
        },
      };
    },
  },
  {
    name: 'problem+json body, custom status, legacy fields on request',
    spec: () => {
      const c = clock();
      const global = fixedWindow({ permitLimit: 1, window: '1m', clock: c });
      return {
        spec: {
          options: { global, status: 503, body: 'problem+json', headers: ['draft-10', 'legacy'] },
          routes: [{ path: '/a' }],
        },
        check: async (base) => {
          const ok = await get(`${base}/a`);
          assert.equal(ok.headers.get('x-ratelimit-limit'), '1');
          assert.equal(ok.headers.get('x-ratelimit-remaining'), '0');
          const rejected = await get(`${base}/a`);
          assert.equal(rejected.status, 503);
          assert.equal(rejected.headers.get('content-type'), 'application/problem+json');
          const problem = JSON.parse(rejected.body);
          assert.equal(problem.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded');
          assert.equal(problem.status, 503);
          assert.deepEqual(problem['violated-policies'], ['global']);
          assert.equal(rejected.headers.get('retry-after'), '60');
          assert.equal(rejected.headers.get('ratelimit-policy'), '"global";q=1;w=60');
        },
      };
    },
  },
  {
    name: 'onRejected changes the answer; a policy without its own falls back to the global hook',
    spec: () => {
      const c = clock();
      const seen: string[] = [];
      const own = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      const plain = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      return {
        spec: {
          options: {
            policies: {
              own: {
                limiter: own,
                onRejected: (ctx) => {
                  seen.push(`own:${ctx.policy}:${ctx.limiter}`);
                  ctx.status = 418;
                  ctx.body = 'teapot';
                },
              },
              plain,
            },
            onRejected: (ctx) => {
              seen.push(`global:${ctx.policy}:${ctx.lease.reason}`);
              ctx.headers.set('x-why', 'limited');
              ctx.body = 'custom';
            },
          },
          routes: [
            { path: '/own', limit: 'own' },
            { path: '/plain', limit: 'plain' },
          ],
        },
        check: async (base) => {
          await get(`${base}/own`);
          const a = await get(`${base}/own`);
          assert.deepEqual([a.status, a.body], [418, 'teapot']);
          await get(`${base}/plain`);
          const b = await get(`${base}/plain`);
          assert.deepEqual([b.status, b.body, b.headers.get('x-why')], [429, 'custom', 'limited']);
          assert.equal(b.headers.get('retry-after'), '10');
          assert.deepEqual(seen, ['own:own:endpoint', 'global:plain:limit']);
        },
      };
    },
  },
  {
    name: 'onRejected may answer by itself, and then floodgate sends nothing',
    spec: () => {
      const global = fixedWindow({ permitLimit: 1, window: '1m' });
      return {
        spec: {
          options: {
            global,
            onRejected: (ctx) => {
              // biome-ignore lint/suspicious/noExplicitAny: one hook for every framework's response object
              const r = ctx.response as any;
              if (typeof r.code === 'function' && typeof r.send === 'function')
                r.code(402).send('paid'); // Fastify
              else if (typeof r.text === 'function' && 'req' in r)
                return new Response('paid', { status: 402 }); // Hono
              else {
                r.statusCode = 402; // node:http, Express
                r.end('paid');
              }
            },
          },
          routes: [{ path: '/a' }],
        },
        check: async (base) => {
          assert.equal((await get(`${base}/a`)).status, 200);
          const own = await get(`${base}/a`);
          assert.deepEqual([own.status, own.body], [402, 'paid']);
        },
      };
    },
  },
  {
    name: 'Retry-After per algorithm: sliding window and token bucket say when, concurrency does not',
    spec: () => {
      const c = clock();
      const sliding = slidingWindow({ permitLimit: 2, window: '10s', segmentsPerWindow: 5, clock: c });
      const bucket = tokenBucket({ tokenLimit: 1, tokensPerPeriod: 1, period: '3s', clock: c });
      const slots = concurrency({ permitLimit: 1 });
      return {
        spec: {
          options: { policies: { sliding, bucket, slots } },
          routes: [
            { path: '/sliding', limit: 'sliding' },
            { path: '/bucket', limit: 'bucket' },
            { path: '/slots', limit: 'slots' },
          ],
        },
        check: async (base) => {
          await get(`${base}/sliding`);
          c.t = 4_500;
          await get(`${base}/sliding`);
          const s = await get(`${base}/sliding`);
          assert.equal(s.status, 429);
          assert.equal(s.headers.get('retry-after'), '6', 'the first segment leaves the window at t=10s');
          await get(`${base}/bucket`);
          c.t = 5_000;
          const b = await get(`${base}/bucket`);
          assert.equal(b.status, 429);
          assert.equal(b.headers.get('retry-after'), '1', 'next token at t=6s');
          const held = get(`${base}/slots?delay=300`);
          await new Promise((r) => setTimeout(r, 100));
          const busy = await get(`${base}/slots`);
          assert.equal(busy.status, 429);
          assert.equal(busy.headers.get('retry-after'), null);
          assert.match(busy.headers.get('ratelimit-policy')!, /"slots";q=1;qu="concurrent-requests"/);
          assert.equal((await held).status, 200);
          assert.equal((await get(`${base}/slots`)).status, 200, 'the permit came back');
        },
      };
    },
  },
  {
    name: 'a concurrency policy with a queue holds requests until admitted, rejects past the queue',
    spec: () => {
      const slots = concurrency({ permitLimit: 1, queueLimit: 1 });
      return {
        spec: { options: { policies: { slots } }, routes: [{ path: '/slow', limit: 'slots' }] },
        check: async (base) => {
          // Each step waits for the limiter's state, not for a time: under load a fixed sleep lets the holder
          // finish before the third request arrives.
          const until = async (done: () => boolean) => {
            for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
          };
          const first = get(`${base}/slow?delay=1500`);
          await until(() => slots.statistics().available === 0);
          const queued = get(`${base}/slow?delay=10`);
          await until(() => slots.statistics().queued === 1);
          const third = await get(`${base}/slow`);
          assert.equal(third.status, 429, 'queue full');
          assert.deepEqual([(await first).status, (await queued).status], [200, 200]);
          assert.equal(slots.statistics().available, 1);
        },
      };
    },
  },
  {
    name: 'a key function that throws fails that request, not the server',
    spec: () => {
      const global = partitioned({
        key: (req: import('../../src/http/request.ts').RequestLike) => {
          if (boom(req) !== undefined) throw new Error('bad key');
          return 'k';
        },
        limiter: fixedWindow({ permitLimit: 10, window: '1m' }),
      });
      return {
        spec: { options: { global }, routes: [{ path: '/a' }] },
        check: async (base) => {
          assert.equal((await get(`${base}/a`, { 'x-boom': '1' })).status, 500);
          assert.equal((await get(`${base}/a`)).status, 200);
        },
      };
    },
  },
  {
    name: 'a client that disconnects while queued leaves the queue at once',
    spec: () => {
      const slots = concurrency({ permitLimit: 1, queueLimit: 4 });
      return {
        spec: { options: { policies: { slots } }, routes: [{ path: '/slow', limit: 'slots' }] },
        check: async (base) => {
          const holder = get(`${base}/slow?delay=1500`);
          await new Promise((r) => setTimeout(r, 150));
          const controller = new AbortController();
          const waiting = fetch(`${base}/slow`, { signal: controller.signal }).catch(() => 'aborted');
          for (let i = 0; i < 50 && slots.statistics().queued === 0; i++)
            await new Promise((r) => setTimeout(r, 10));
          assert.equal(slots.statistics().queued, 1);
          controller.abort();
          assert.equal(await waiting, 'aborted');
          for (let i = 0; i < 50 && slots.statistics().queued > 0; i++)
            await new Promise((r) => setTimeout(r, 10));
          assert.equal(slots.statistics().queued, 0, 'left the queue while the holder still runs');
          assert.equal(slots.statistics().available, 0);
          assert.equal((await holder).status, 200);
          assert.equal(slots.statistics().available, 1, 'nothing was charged for the canceled request');
        },
      };
    },
  },
  {
    name: 'dry run decides and reports but lets everything through',
    spec: () => {
      const c = clock();
      const global = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
      const calls: boolean[] = [];
      return {
        spec: {
          options: {
            global,
            dryRun: true,
            onRejected: (ctx) => {
              calls.push(ctx.dryRun);
            },
          },
          routes: [{ path: '/a' }],
        },
        check: async (base) => {
          for (let i = 0; i < 3; i++) {
            const r = await get(`${base}/a`);
            assert.equal(r.status, 200);
            assert.match(r.headers.get('ratelimit')!, /^"global";r=0/);
          }
          assert.deepEqual(calls, [true, true]);
        },
      };
    },
  },
];

for (const [adapter, start] of Object.entries(adapters)) {
  describe(`rate limiting over ${adapter}`, () => {
    for (const scenario of scenarios) {
      test(scenario.name, async () => {
        const { spec, check } = scenario.spec();
        const app = await start(spec);
        try {
          await check(app.url);
        } finally {
          await app.close();
        }
      });
    }
  });
}
