/**
 * A concurrency permit comes back at the first of: the response finished, the client gone, the timeout
 * answered — on every adapter, even when the handler never settles.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { concurrency } from '../../src/index.ts';
import { eventually, fetchText, getThenLeave, never, STACK_ADAPTERS, startStack } from './stack.ts';

for (const adapter of STACK_ADAPTERS) {
  describe(`permits over ${adapter}`, () => {
    test('a never-settling handler gives its permit back when the client goes away', async () => {
      const slots = concurrency({ permitLimit: 2 });
      const stack = await startStack(adapter, {
        limits: { policies: { slots } },
        routes: [
          { path: '/never', limit: 'slots', handler: never },
          { path: '/ok', limit: 'slots', handler: () => 'ok' },
        ],
      });
      try {
        const first = getThenLeave(`${stack.url}/never`, () => slots.statistics().available === 1);
        await eventually(() => slots.statistics().available === 1);
        const second = getThenLeave(`${stack.url}/never`, () => slots.statistics().available === 0);
        await Promise.all([first, second]);
        assert.ok(
          await eventually(() => slots.statistics().available === 2),
          `permits out after both clients left: ${2 - slots.statistics().available}`,
        );
        assert.equal((await fetchText(`${stack.url}/ok`)).status, 200);
      } finally {
        await stack.close();
      }
    });

    test('a never-settling handler gives its permit back when the timeout answers', async () => {
      const slots = concurrency({ permitLimit: 2 });
      const stack = await startStack(adapter, {
        timeouts: { default: '150ms' },
        limits: { policies: { slots } },
        routes: [
          { path: '/never', limit: 'slots', handler: never },
          { path: '/ok', limit: 'slots', handler: () => 'ok' },
        ],
      });
      try {
        const answers = await Promise.all([fetchText(`${stack.url}/never`), fetchText(`${stack.url}/never`)]);
        assert.deepEqual(
          answers.map((a) => a.status),
          [504, 504],
        );
        assert.ok(
          await eventually(() => slots.statistics().available === 2),
          `permits out after both timed out: ${2 - slots.statistics().available}`,
        );
        assert.equal((await fetchText(`${stack.url}/ok`)).status, 200);
      } finally {
        await stack.close();
      }
    });
  });
}

describe('permits on Hono without @hono/node-server (app.request, web Request/Response only)', () => {
  test('a never-settling handler gives its permit back when the timeout answers or the request aborts', async (t) => {
    const { Hono } = await import('hono');
    const { rateLimiting } = await import('../../src/adapters/hono/rate-limiting.ts');
    const { requestTimeouts } = await import('../../src/adapters/hono/timeouts.ts');
    const slots = concurrency({ permitLimit: 1 });
    const limiter = rateLimiting({ policies: { slots } });
    // No server here keeps the process alive, and deadline timers do not (they are unref'd).
    const alive = setInterval(() => {}, 1000);
    t.after(() => clearInterval(alive));
    const timed = new Hono();
    timed.use(requestTimeouts({ default: '100ms' }));
    timed.get('/never', limiter.requirePolicy('slots'), () => new Promise<Response>(() => {}));
    assert.equal((await timed.request('/never')).status, 504);
    assert.ok(await eventually(() => slots.statistics().available === 1), 'back after the timeout answered');

    const plain = new Hono();
    plain.get('/never', limiter.requirePolicy('slots'), () => new Promise<Response>(() => {}));
    const controller = new AbortController();
    Promise.resolve(plain.request(new Request('http://x/never', { signal: controller.signal }))).catch(
      () => {},
    );
    assert.ok(await eventually(() => slots.statistics().available === 0));
    controller.abort();
    assert.ok(await eventually(() => slots.statistics().available === 1), 'back after the request aborted');
  });
});
