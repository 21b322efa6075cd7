/**
 * 10 000 requests per adapter whose handlers ignore their signal: every one is answered near its deadline,
 * nothing throws or goes unhandled, and memory is flat once the late handlers are done.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Client } from 'undici';
import { type AdapterName, serveWith } from './harness.ts';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const DEADLINE = 200;
// Handlers write this long after they start. Far past the deadline on purpose: a timer set while the event
// loop is starved counts from the loop's cached clock, so on a loaded machine a "600 ms" sleep can end before a
// deadline 200 ms after the (real) start of the request.
const LATE = 2000;
const WORKERS = 400; // connections, each sending its requests one after another
const SLACK = 2500; // how late past its deadline an answer may be written on a loaded 2-core machine
const HANGING = 15_000; // a client waiting longer was left hanging (its wait includes queueing before any middleware)

async function heapAfterGc(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    await sleep(20);
  }
  return process.memoryUsage().heapUsed;
}

async function run(
  url: string,
  total: number,
): Promise<{ statuses: Map<number, number>; latencies: number[] }> {
  const statuses = new Map<number, number>();
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      const client = new Client(url, { pipelining: 1 });
      try {
        while (next < total) {
          next++;
          const start = performance.now();
          const res = await client.request({ path: '/ignores', method: 'GET' });
          await res.body.text();
          latencies.push(performance.now() - start);
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        }
      } finally {
        await client.close();
      }
    }),
  );
  return { statuses, latencies };
}

for (const adapter of ['node', 'express5', 'fastify', 'hono'] as AdapterName[]) {
  describe(`under load over ${adapter}`, () => {
    test('10 000 ignoring handlers: all answered near the deadline, no errors, memory flat', async (t) => {
      const processErrors: unknown[] = [];
      const onProcessError = (error: unknown) => processErrors.push(error);
      process.on('unhandledRejection', onProcessError);
      process.on('uncaughtException', onProcessError);
      let late = 0;
      // Measured in the server, where the deadline is: the client's clock also counts the time a request waits
      // for the overloaded server to read it, before any middleware sees it.
      const lateness: number[] = [];
      const served = await serveWith(adapter, { default: DEADLINE }, [
        {
          path: '/ignores',
          handler: async (io) => {
            const timeout = io.timeout;
            // The answer is written synchronously right after the signal's listeners run.
            timeout.signal.addEventListener('abort', () =>
              lateness.push(performance.now() - timeout.deadline),
            );
            await sleep(LATE);
            io.send(200, 'late');
            late++;
          },
        },
      ]);
      try {
        const warm = await run(served.url, 2000);
        assert.deepEqual([...warm.statuses], [[504, 2000]]);
        await sleep(LATE + 300);
        const before = await heapAfterGc();

        const { statuses, latencies } = await run(served.url, 10_000);
        assert.deepEqual([...statuses], [[504, 10_000]]);
        latencies.sort((a, b) => a - b);
        assert.ok(
          latencies[0] >= DEADLINE - 25,
          `an answer came after ${latencies[0].toFixed(0)} ms, before the deadline`,
        );
        const worst = latencies[latencies.length - 1];
        assert.ok(worst <= HANGING, `a client waited ${worst.toFixed(0)} ms`);
        assert.equal(lateness.length, 12_000);
        lateness.sort((a, b) => a - b);
        assert.ok(lateness[0] >= -2, `a deadline fired ${(-lateness[0]).toFixed(1)} ms early`);
        const latest = lateness[lateness.length - 1];
        assert.ok(latest <= SLACK, `an answer was written ${latest.toFixed(0)} ms after its deadline`);

        await sleep(LATE + 500);
        assert.equal(late, 12_000, 'not every late handler finished its (dropped) write');
        const afterRun = await heapAfterGc();
        const growth = (afterRun - before) / 1024 / 1024;
        assert.ok(growth < 8, `heap grew by ${growth.toFixed(1)} MB over 10 000 timed-out requests`);
        assert.deepEqual(served.errors, []);
        assert.deepEqual(processErrors, []);
        const median = lateness[lateness.length >> 1];
        t.diagnostic(
          `answers written ${median.toFixed(1)} ms (median) / ${latest.toFixed(0)} ms (worst) after the deadline; ` +
            `client waited at most ${worst.toFixed(0)} ms; heap growth ${growth.toFixed(2)} MB`,
        );
      } finally {
        await served.close();
        process.off('unhandledRejection', onProcessError);
        process.off('uncaughtException', onProcessError);
      }
    });
  });
}
