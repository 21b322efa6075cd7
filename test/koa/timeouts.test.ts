/**
 * floodgate/koa's requestTimeouts over real sockets through Koa 3 and @koa/router: the policy answers at the
 * deadline even when the handler ignores its signal (and what the handler does later is dropped), route-level
 * settings, a streamed body cut at the deadline, late errors, and queue time counted against the deadline.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { rateLimiting, requestTimeouts } from '../../src/adapters/koa/index.ts';
import { concurrency } from '../../src/index.ts';
import { gate, get, start, until, using } from './app.ts';

describe('Koa requestTimeouts', () => {
  test('answers at the deadline for a handler that ignores its signal; its late body and writes are dropped', async () => {
    const timeouts = requestTimeouts({ default: '100ms' });
    const release = gate();
    const seen: { aborted?: boolean; finished?: boolean } = {};
    await using(
      start((app, router) => {
        app.use(timeouts);
        router.get('/stuck', async (ctx) => {
          await release.promise; // ignores ctx.state.requestTimeout.signal
          seen.aborted = ctx.state.requestTimeout?.signal.aborted;
          ctx.status = 200;
          ctx.body = 'late';
          ctx.res.write('late write');
          seen.finished = true;
        });
        router.get('/quick', (ctx) => {
          ctx.body = 'quick';
        });
      }),
      async ({ url, errors }) => {
        const answer = await get(`${url}/stuck`);
        assert.equal(answer.status, 504);
        assert.equal(answer.body, '');
        release.open();
        await until(() => seen.finished === true, 'the handler to finish');
        assert.equal(seen.aborted, true, 'the signal aborted at the deadline');
        assert.deepEqual(errors, []);
        const quick = await get(`${url}/quick`);
        assert.deepEqual([quick.status, quick.body], [200, 'quick']);
      },
    );
  });

  test('route settings: a duration, a named policy with its answer, false; an unknown name fails at startup', async () => {
    const timeouts = requestTimeouts({
      default: '1h',
      policies: {
        slow: { timeout: '100ms', status: 503, body: 'slow policy', headers: { 'x-policy': 'slow' } },
      },
    });
    assert.throws(() => timeouts.route('slwo'), /slwo/);
    const never = new Promise<void>(() => {});
    await using(
      start((app, router) => {
        app.use(timeouts);
        router.get('/duration', timeouts.route('100ms'), async () => never);
        router.get('/policy', timeouts.route('slow'), async () => never);
        router.get('/off', timeouts.route(false), async (ctx) => {
          ctx.body = String(ctx.state.requestTimeout?.deadline);
        });
      }),
      async ({ url }) => {
        assert.equal((await get(`${url}/duration`)).status, 504);
        const policy = await get(`${url}/policy`);
        assert.deepEqual(
          [policy.status, policy.body, policy.headers.get('x-policy')],
          [503, 'slow policy', 'slow'],
        );
        const off = await get(`${url}/off`);
        assert.deepEqual([off.status, off.body], [200, 'Infinity']);
      },
    );
  });

  test('a body that had started streaming is cut at the deadline', async () => {
    const timeouts = requestTimeouts({ default: '150ms' });
    let stream: PassThrough | undefined;
    await using(
      start((app, router) => {
        app.use(timeouts);
        router.get('/stream', (ctx) => {
          stream = new PassThrough();
          ctx.body = stream;
          stream.write('first');
        });
      }),
      async ({ url }) => {
        const response = await fetch(`${url}/stream`);
        assert.equal(response.status, 200);
        await assert.rejects(response.text(), 'the connection closed before the end of the body');
        stream!.destroy();
      },
    );
  });

  test("after the deadline a handler's abort error is expected; another error goes to app 'error'", async () => {
    const timeouts = requestTimeouts({ default: '100ms' });
    await using(
      start((app, router) => {
        app.use(timeouts);
        router.get('/abort', async (ctx) => {
          const signal = ctx.state.requestTimeout!.signal;
          await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
        });
        router.get('/fail', async (ctx) => {
          const signal = ctx.state.requestTimeout!.signal;
          await new Promise((resolve) => signal.addEventListener('abort', resolve));
          await new Promise((resolve) => setImmediate(resolve));
          throw new Error('failed after the deadline');
        });
      }),
      async ({ url, errors }) => {
        assert.equal((await get(`${url}/abort`)).status, 504);
        assert.equal((await get(`${url}/fail`)).status, 504);
        await until(() => errors.length === 1, "the late error on app 'error'");
        assert.match(String(errors[0]), /failed after the deadline/);
      },
    );
  });

  test('time in the rate limiter queue counts: a queued request gets the timeout answer and leaves the queue', async () => {
    const timeouts = requestTimeouts({ default: '150ms' });
    const slots = concurrency({ permitLimit: 1, queueLimit: 4 });
    const limiter = rateLimiting({ policies: { slots } });
    const holder = gate();
    let admitted = 0;
    await using(
      start((app, router) => {
        app.use(timeouts);
        app.use(limiter);
        router.get('/slow', timeouts.route(false), limiter.requirePolicy('slots'), async (ctx) => {
          admitted++;
          await holder.promise;
          ctx.body = 'held';
        });
        router.get('/queued', limiter.requirePolicy('slots'), (ctx) => {
          admitted++;
          ctx.body = 'never';
        });
      }),
      async ({ url }) => {
        const held = get(`${url}/slow`);
        await until(() => admitted === 1, 'the holder');
        const queued = await get(`${url}/queued`);
        assert.equal(queued.status, 504);
        assert.equal(slots.statistics().queued, 0, 'out of the queue');
        holder.open();
        assert.equal((await held).body, 'held');
        assert.equal(admitted, 1, 'the timed-out request never ran');
        await until(() => slots.statistics().available === 1, 'the permit back');
      },
    );
  });

  test('timeouts.route() without the app-level middleware fails the request naming the fix', async () => {
    const timeouts = requestTimeouts({ default: '1s' });
    await using(
      start((_app, router) => {
        router.get('/', timeouts.route('100ms'), (ctx) => {
          ctx.body = 'ok';
        });
      }),
      async ({ url, errors }) => {
        assert.equal((await get(url)).status, 500);
        assert.match(String(errors[0]), /install it with app.use\(\)/);
      },
    );
  });
});
