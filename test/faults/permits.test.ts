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
