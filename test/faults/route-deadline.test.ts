/**
 * A route's own timeout bounds the time its request spends queued, on every adapter and whichever order the
 * route's markers come in; and `graceMs` lets a handler that catches its cancellation answer a partial result.
 * Socket tests: statuses and the order of answers, never durations.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { concurrency } from '../../src/index.ts';
import { eventually, fetchText, STACK_ADAPTERS, type StackRoute, startStack } from './stack.ts';

const HOLD_MS = 2000; // far past the 150 ms route timeout: which answer comes first shows the bound

/** A route that holds the one permit of `slots` for HOLD_MS, and says whether it has finished. */
function holding(): { route: StackRoute; done: boolean } {
  const holder = {
    done: false,
    route: {
      path: '/hold',
      limit: 'slots',
      handler: async () => {
        await sleep(HOLD_MS);
        holder.done = true;
        return 'held';
      },
    } as StackRoute,
  };
  return holder;
}

/** A handler that catches its cancellation after an awaited call and answers a partial result. */
const catching = async (signal: AbortSignal | undefined): Promise<string> => {
  try {
    await sleep(5000, undefined, { signal });
    return 'full';
  } catch {
    await sleep(20); // still asynchronous work after the abort: out of reach of an 'abort' listener
    return 'partial';
  }
};

for (const adapter of STACK_ADAPTERS) {
  describe(`route timeouts over ${adapter}`, () => {
    for (const timeoutLast of [false, true]) {
      test(`a queued request answers at its route's deadline (timeout marker ${timeoutLast ? 'after' : 'before'} the limiter's)`, async () => {
        const slots = concurrency({ permitLimit: 1, queueLimit: 5 });
        const holder = holding();
        const stack = await startStack(adapter, {
          timeouts: {},
          limits: { policies: { slots } },
          routes: [
            holder.route,
            { path: '/quick', limit: 'slots', timeout: '150ms', timeoutLast, handler: () => 'quick' },
          ],
        });
        try {
          const held = fetchText(`${stack.url}/hold`);
          assert.ok(await eventually(() => slots.statistics().available === 0));
          const quick = await fetchText(`${stack.url}/quick`);
          assert.equal(quick.status, 504);
          assert.equal(holder.done, false, 'answered at its deadline, not when the permit came back');
          assert.equal(slots.statistics().queued, 0);
          assert.equal((await held).status, 200);
        } finally {
          await stack.close();
        }
      });
    }

    test('graceMs: a handler that catches its cancellation answers a partial result', async () => {
      const stack = await startStack(adapter, {
        timeouts: { policies: { graceful: { timeout: '150ms', graceMs: 3000 } } },
        limits: {},
        routes: [
          {
            path: '/catch',
            timeout: 'graceful',
            handler: catching,
          },
          {
            path: '/catch-no-grace',
            timeout: '150ms',
            handler: catching,
          },
        ],
      });
      try {
        assert.deepEqual(await fetchText(`${stack.url}/catch`), { status: 200, body: 'partial' });
        assert.equal((await fetchText(`${stack.url}/catch-no-grace`)).status, 504);
      } finally {
        await stack.close();
      }
    });

    test('graceMs: without an answer in the grace, the policy answers at its end', async () => {
      let handlerDone = false;
      const stack = await startStack(adapter, {
        timeouts: { policies: { graceful: { timeout: '100ms', graceMs: 200 } } },
        limits: {},
        routes: [
          {
            path: '/ignores',
            timeout: 'graceful',
            handler: async () => {
              await sleep(HOLD_MS);
              handlerDone = true;
              return 'late';
            },
          },
        ],
      });
      try {
        assert.equal((await fetchText(`${stack.url}/ignores`)).status, 504);
        assert.equal(handlerDone, false);
      } finally {
        await stack.close();
      }
    });

    test('graceMs: a request still queued at its deadline gets the answer then, not after the grace', async () => {
      const slots = concurrency({ permitLimit: 1, queueLimit: 5 });
      const holder = holding();
      const stack = await startStack(adapter, {
        timeouts: { policies: { graceful: { timeout: '150ms', graceMs: HOLD_MS * 2 } } },
        limits: { policies: { slots } },
        routes: [
          holder.route,
          { path: '/quick', limit: 'slots', timeout: 'graceful', handler: () => 'quick' },
        ],
      });
      try {
        const held = fetchText(`${stack.url}/hold`);
        assert.ok(await eventually(() => slots.statistics().available === 0));
        assert.equal((await fetchText(`${stack.url}/quick`)).status, 504);
        assert.equal(holder.done, false);
        await held;
      } finally {
        await stack.close();
      }
    });
  });
}
