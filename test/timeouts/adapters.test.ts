/**
 * The table of timeout cases, run against every adapter over real sockets. Timings are asserted only within
 * generous margins: this machine is small and shared.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from 'undici';
import type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from '../../src/http/index.ts';
import { connect, get } from './client.ts';
import { ADAPTERS, type AdapterName, type RouteDef, type Served, serveWith } from './harness.ts';

const LATE = 700; // when ignoring handlers finally write, well past every deadline below
const SLACK = 1000; // how late an answer may arrive on a busy machine and still count as "at the deadline"

interface Record {
  reason?: string;
  abortedAt?: number;
  doneAt?: number;
  start?: number;
  ran?: boolean;
  finished?: Promise<void>;
}

function ignoring(path: string, records: Map<string, Record>, extra: Partial<RouteDef> = {}): RouteDef {
  return {
    path,
    ...extra,
    handler: async (io) => {
      const record: Record = { start: performance.now(), ran: true };
      let finish!: () => void;
      record.finished = new Promise((r) => (finish = r));
      records.set(path, record);
      io.timeout.onHandlerDone(() => (record.doneAt = performance.now()));
      await sleep(LATE);
      io.send(200, 'late body that must not leak', { 'x-late': 'yes' });
      finish();
    },
  };
}

function routes(records: Map<string, Record>): RouteDef[] {
  return [
    { path: '/ok', handler: (io) => io.send(200, 'ok') },
    ignoring('/ignores', records),
    ignoring('/named', records, { timeout: 'slow' }),
    ignoring('/named-duration', records, { timeout: 'quick' }),
    ignoring('/route-duration', records, { timeout: '150ms' }),
    ignoring('/route-policy', records, { timeout: { timeout: '150ms', status: 503, body: 'inline' } }),
    {
      path: '/disabled',
      timeout: false,
      handler: async (io) => {
        await sleep(500);
        io.send(200, 'finished');
      },
    },
    {
      path: '/self-disable',
      handler: async (io) => {
        io.timeout.disable();
        await sleep(500);
        io.send(200, 'finished');
      },
    },
    {
      path: '/signal',
      handler: async (io) => {
        const record: Record = {};
        records.set('/signal', record);
        try {
          await sleep(5000, undefined, { signal: io.timeout.signal });
        } catch {
          // timers/promises rejects with an AbortError whose cause is the signal's reason.
          record.reason = (io.timeout.signal.reason as Error).name;
          record.abortedAt = performance.now();
        }
        io.send(200, 'after abort, dropped');
      },
    },
    {
      path: '/rethrows',
      handler: async (io) => {
        await sleep(5000, undefined, { signal: io.timeout.signal });
        io.send(200, 'never sent');
      },
    },
    {
      path: '/listener-answers',
      handler: async (io) => {
        io.timeout.signal.addEventListener('abort', () => io.send(503, 'answered by listener'));
        await sleep(LATE);
        io.send(200, 'late body that must not leak');
      },
    },
    {
      path: '/own-deadline',
      handler: async (io) => {
        try {
          // Its own deadline well before the policy's (300 ms): a CI machine whose test processes starve each
          // other for a moment must not push it past.
          await sleep(5000, undefined, {
            signal: AbortSignal.any([io.timeout.signal, AbortSignal.timeout(50)]),
          });
        } catch {
          io.send(200, 'fallback');
        }
        await sleep(400); // still running past the deadline, after answering
      },
    },
    {
      path: '/started',
      handler: async (io) => {
        io.stream(200, 'partial;');
        await sleep(LATE);
        io.write('more;');
        io.end();
      },
    },
    {
      path: '/queued',
      timeout: '200ms',
      before: async (timeout) => {
        await sleep(5000, undefined, { signal: timeout.signal });
      },
      handler: (io) => {
        records.set('/queued', { ran: true });
        io.send(200, 'served after the queue');
      },
    },
    {
      path: '/disconnect',
      timeout: '5s',
      handler: async (io) => {
        const record: Record = { start: performance.now() };
        records.set('/disconnect', record);
        try {
          await sleep(5000, undefined, { signal: io.timeout.signal });
        } catch {
          record.reason = (io.timeout.signal.reason as Error).name;
          record.abortedAt = performance.now();
        }
        io.send(200, 'nobody is listening');
      },
    },
  ];
}

function options(timeouts: TimeoutInfo[], overruns: OverrunInfo[]): RequestTimeoutsOptions {
  return {
    default: { timeout: 300, headers: { 'x-timeout': 'default' }, body: 'default timeout' },
    policies: {
      slow: { timeout: '600ms', status: 503, body: 'slow policy', headers: { 'x-policy': 'slow' } },
      quick: '200ms',
    },
    onTimeout: (info) => timeouts.push(info),
    onOverrun: (info) => overruns.push(info),
  };
}

function near(ms: number, deadline: number): void {
  assert.ok(ms >= deadline - 25, `answered after ${ms.toFixed(0)} ms, before the ${deadline} ms deadline`);
  assert.ok(
    ms <= deadline + SLACK,
    `answered after ${ms.toFixed(0)} ms, long after the ${deadline} ms deadline`,
  );
}

for (const adapter of ADAPTERS) {
  describe(`request timeouts over ${adapter}`, () => {
    const records = new Map<string, Record>();
    const timeouts: TimeoutInfo[] = [];
    const overruns: OverrunInfo[] = [];
    const processErrors: unknown[] = [];
    const onProcessError = (error: unknown) => processErrors.push(error);
    let served: Served;
    let client: Client;

    before(async () => {
      process.on('unhandledRejection', onProcessError);
      process.on('uncaughtException', onProcessError);
      served = await serveWith(adapter as AdapterName, options(timeouts, overruns), routes(records));
      client = connect(served.url);
    });
    after(async () => {
      await client.close();
      await served.close();
      process.off('unhandledRejection', onProcessError);
      process.off('uncaughtException', onProcessError);
    });

    // After a timed-out request, the late handler writes; the next answer on the same connection must be clean.
    async function nextIsClean(path: string): Promise<void> {
      await records.get(path)?.finished;
      await sleep(20);
      const next = await get(client, '/ok');
      assert.equal(next.status, 200);
      assert.equal(next.body, 'ok', 'bytes written after the deadline leaked into the next response');
      assert.equal(next.headers['x-late'], undefined);
    }

    test('default policy: 504 with the configured body and headers at the deadline, late writes dropped', async () => {
      const answer = await get(client, '/ignores');
      assert.equal(answer.status, 504);
      assert.equal(answer.body, 'default timeout');
      assert.equal(answer.headers['x-timeout'], 'default');
      assert.equal(answer.headers['content-type'], 'text/plain; charset=utf-8');
      near(answer.ms, 300);
      await nextIsClean('/ignores');
      const record = records.get('/ignores')!;
      // Done is when the handler finished, not when we answered.
      assert.ok(
        record.doneAt! - record.start! >= LATE - 25,
        'onHandlerDone fired before the handler finished',
      );
      const overrun = overruns.find((o) => o.route === '/ignores');
      assert.ok(overrun, 'onOverrun was not called for /ignores');
      assert.equal(overrun.policy, 'default');
      assert.ok(
        overrun.overrunMs >= LATE - 300 - 50 && overrun.overrunMs < LATE + SLACK,
        `overrun ${overrun.overrunMs}`,
      );
      const timeout = timeouts.find((t) => t.route === '/ignores');
      assert.deepEqual(
        { ...timeout },
        { policy: 'default', route: '/ignores', method: 'GET', result: 'answered', overrun: true },
      );
    });

    test('a named policy answers with its own status, body and headers', async () => {
      const answer = await get(client, '/named');
      assert.equal(answer.status, 503);
      assert.equal(answer.body, 'slow policy');
      assert.equal(answer.headers['x-policy'], 'slow');
      near(answer.ms, 600);
      await nextIsClean('/named');
    });

    test('a named policy given only a duration answers like the default policy', async () => {
      const answer = await get(client, '/named-duration');
      assert.equal(answer.status, 504);
      assert.equal(answer.body, 'default timeout');
      assert.equal(answer.headers['x-timeout'], 'default');
      near(answer.ms, 200);
      await nextIsClean('/named-duration');
    });

    test('a route duration overrides the default and inherits its response', async () => {
      const answer = await get(client, '/route-duration');
      assert.equal(answer.status, 504);
      assert.equal(answer.body, 'default timeout');
      near(answer.ms, 150);
      await nextIsClean('/route-duration');
    });

    test('a route policy object answers with its own response', async () => {
      const answer = await get(client, '/route-policy');
      assert.equal(answer.status, 503);
      assert.equal(answer.body, 'inline');
      near(answer.ms, 150);
      await nextIsClean('/route-policy');
    });

    test('a disabled route runs past the default deadline', async () => {
      const answer = await get(client, '/disabled');
      assert.equal(answer.status, 200);
      assert.equal(answer.body, 'finished');
    });

    test('a handler can disable its own timeout', async () => {
      const answer = await get(client, '/self-disable');
      assert.equal(answer.status, 200);
      assert.equal(answer.body, 'finished');
    });

    test('the signal aborts at the deadline with a TimeoutError', async () => {
      const answer = await get(client, '/signal');
      assert.equal(answer.status, 504);
      assert.equal(answer.body, 'default timeout');
      near(answer.ms, 300);
      await sleep(50);
      assert.equal(records.get('/signal')!.reason, 'TimeoutError');
      await nextIsClean('/signal');
    });

    test('a handler that rethrows its abort gets the policy answer, and nothing is logged', async () => {
      const answer = await get(client, '/rethrows');
      assert.equal(answer.status, 504);
      assert.equal(answer.body, 'default timeout');
      near(answer.ms, 300);
      await sleep(50);
      assert.deepEqual(served.errors, []);
      await nextIsClean('/rethrows');
    });

    test("an 'abort' listener that answers at the deadline is not overridden", async () => {
      const answer = await get(client, '/listener-answers');
      near(answer.ms, 300);
      if (adapter === 'hono') {
        // A Hono route answers by returning a Response, which a listener cannot do: the policy answers.
        assert.equal(answer.status, 504);
      } else {
        assert.equal(answer.status, 503);
        assert.equal(answer.body, 'answered by listener');
        assert.equal(timeouts.find((t) => t.route === '/listener-answers')?.result, 'handler');
      }
      await sleep(LATE);
      await nextIsClean('/listener-answers');
    });

    test('a handler that answers before the deadline is not overridden, even if it keeps running', async () => {
      const answer = await get(client, '/own-deadline');
      assert.equal(answer.status, 200);
      assert.equal(answer.body, 'fallback');
      await sleep(500);
      assert.equal(
        timeouts.find((t) => t.route === '/own-deadline'),
        undefined,
      );
      await nextIsClean('/own-deadline');
    });

    test('a response already started at the deadline is cut: the connection closes, never left hanging', async () => {
      const answer = await get(client, '/started');
      assert.equal(answer.status, 200);
      assert.ok(answer.error, 'the body completed although the handler never ended it before the deadline');
      assert.equal(answer.body, 'partial;');
      near(answer.ms, 300);
      await sleep(LATE);
      const timeout = timeouts.find((t) => t.route === '/started');
      assert.equal(timeout?.result, 'cut');
      await nextIsClean('/started');
    });

    test('time spent queued before the handler counts against the deadline', async () => {
      const answer = await get(client, '/queued');
      assert.equal(answer.status, 504);
      near(answer.ms, 200);
      assert.equal(records.get('/queued'), undefined, 'the handler ran after its deadline');
      await nextIsClean('/queued');
    });

    test('a client disconnect aborts the signal with an AbortError, not a TimeoutError', async () => {
      const answer = await get(client, '/disconnect', 100);
      assert.ok(answer.error);
      await sleep(300);
      const record = records.get('/disconnect');
      assert.equal(record?.reason, 'AbortError');
      assert.ok(record.abortedAt! - record.start! < 1000);
      assert.equal(
        timeouts.find((t) => t.route === '/disconnect'),
        undefined,
      );
    });

    test('nothing threw, logged an error, or went unhandled', async () => {
      await sleep(LATE);
      assert.deepEqual(served.errors, []);
      assert.deepEqual(processErrors, []);
    });
  });
}
