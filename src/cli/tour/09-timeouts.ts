import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { rateLimiting, requestTimeoutOf, requestTimeouts } from '../../adapters/node/index.ts';
import { concurrency } from '../../index.ts';
import { type Answer, type Chapter, fields, got, line, say, sent, why } from './chapter.ts';

// Every handler has 1 s of work: 8 steps of 125 ms. A step ends at 250 ms and the next at 375 ms, well clear
// of the 300 ms deadline, so a handler that stops at the abort has done 2 steps on any machine.
const STEPS = 8;
const STEP_MS = 125;
// Work of a queued request: two of them fit in the 300 ms budget one after the other (with room for a slow
// machine), a third does not.
const QUEUED_MS = 110;

/** Works through the steps, stopping at the abort when given a signal. `job.steps` counts what got done. */
async function work(job: { steps: number }, signal?: AbortSignal): Promise<void> {
  try {
    for (; job.steps < STEPS; job.steps++) await sleep(STEP_MS, undefined, { signal });
  } catch (error) {
    if (!signal?.aborted) throw error;
  }
}

/**
 * What the server side says (handlers, hooks) arrives after the client's answer, sometimes long after:
 * `expect(key)` before sending, `note(key, text)` on the server, await the promise to print it.
 */
function notebook() {
  const waiting = new Map<string, (text: string) => void>();
  return {
    expect: (key: string) => new Promise<string>((resolve) => waiting.set(key, resolve)),
    note: (key: string, text: string) => waiting.get(key)?.(text),
  };
}

/** Sends GET `path` and gives up (closes the connection) after `ms`, as an impatient client does. */
function giveUp(base: string, path: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const req = http.get(`${base}${path}`, { agent: false });
    req.on('error', () => {}); // the hang-up is ours
    req.on('close', resolve);
    setTimeout(() => req.destroy(), ms);
  });
}

const body = (a: Answer) => line(`body: ${JSON.stringify(a.body)}`);
const reason = (signal: AbortSignal) => (signal.aborted ? (signal.reason as Error).name : 'not aborted');

/**
 * The chapter's server: node:http, a 300 ms default policy, one route per behaviour. It reports what the
 * handlers and hooks saw through `note`.
 */
async function serve(
  note: (key: string, text: string) => void,
  started: Map<string, number>,
): Promise<{ base: string; server: http.Server }> {
  const withTimeouts = requestTimeouts({
    default: '300ms',
    policies: {
      maintenance: { timeout: '200ms', status: 503, headers: { 'retry-after': '5' }, body: 'busy' },
    },
    onTimeout: (info) => note(`timeout ${info.route}`, `onTimeout: result '${info.result}'`),
    onOverrun: (info) =>
      note(
        `overrun ${info.route}`,
        `onOverrun: the handler finished ${Math.round(info.overrunMs)} ms past the deadline`,
      ),
  });
  // The rate limiter goes inside the timeouts wrapper, so that a request's wait in its queue counts.
  const limit = rateLimiting({ policies: { one: concurrency({ permitLimit: 1, queueLimit: 4 }) } });
  const stopped = (req: IncomingMessage, job: { steps: number }, signal: AbortSignal) =>
    note(
      `handler ${req.url}`,
      `the handler stopped with ${job.steps} of ${STEPS} steps done; signal.reason: ${reason(signal)}`,
    );

  const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
    '/cooperative': withTimeouts(async (req, res) => {
      const { signal } = requestTimeoutOf(req)!;
      const job = { steps: 0 };
      await work(job, signal);
      stopped(req, job, signal);
      res.end('done\n'); // after the deadline: dropped
    }),
    '/ignores': withTimeouts(async (_req, res) => {
      await sleep(STEPS * STEP_MS);
      res.end('done\n'); // dropped, without a "headers already sent" error
    }),
    '/partial': withTimeouts(async (req, res) => {
      const { signal } = requestTimeoutOf(req)!;
      const job = { steps: 0 };
      // Synchronous, so it runs before floodgate answers; only a timeout is worth answering (a client that
      // disconnected reads nothing).
      signal.addEventListener('abort', () => {
        if (signal.reason.name === 'TimeoutError') res.end(`partial: ${job.steps} of ${STEPS} steps\n`);
      });
      await work(job, signal);
    }),
    '/report': withTimeouts(async (req, res) => {
      const timeout = requestTimeoutOf(req)!;
      await sleep(150, undefined, { signal: timeout.signal });
      const left = Math.round(timeout.deadline - performance.now());
      const before = `policy '${timeout.policy}', ${left} ms left`;
      timeout.disable(); // the handler knows this report is a long one
      note(
        'handler /report',
        `at 150 ms: ${before}; after disable(): policy ${timeout.policy}, deadline ${timeout.deadline}`,
      );
      await sleep(450, undefined, { signal: timeout.signal }); // still aborts if the client goes away
      res.end('report ready\n');
    }),
    '/maintenance': withTimeouts(async (req, res) => {
      await work({ steps: 0 }, requestTimeoutOf(req)!.signal);
      res.end('done\n');
    }, 'maintenance'),
    '/queued': withTimeouts(
      limit(async (req, res) => {
        started.set(String(req.headers['x-tour-index']), performance.now());
        // The abort is caught here: behind the rate limiter, a handler that rejects would be
        // rethrown by the limiter as an unhandled rejection (the timeouts wrapper sees only the limiter).
        await sleep(QUEUED_MS, undefined, { signal: requestTimeoutOf(req)!.signal }).catch(() => {});
        res.end('done\n');
      }, 'one'),
    ),
  };
  const server = http.createServer((req, res) => {
    const route = routes[req.url ?? ''];
    if (route) route(req, res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A time budget per request: the answer at the deadline, the handler's signal, overruns, queues. */
export const timeouts: Chapter = {
  title: 'Request timeouts',
  async run(tour) {
    const { expect, note } = notebook();
    const started = new Map<string, number>();
    const { base, server } = await serve(note, started);
    try {
      say(
        `One node:http server, requestTimeouts({ default: '300ms' }) around every route: each request has
        300 ms. Every handler has 1 s of work (${STEPS} steps of ${STEP_MS} ms), so each of them runs out of
        time.`,
      );

      let heard = expect('handler /cooperative');
      let overrun = expect('overrun /cooperative');
      const [coop] = await tour.send(base, { path: '/cooperative' });
      sent('GET /cooperative: the handler awaits each step with requestTimeoutOf(req).signal');
      got([coop]);
      body(coop);
      line(await heard);
      line(await overrun);
      why(
        `At the deadline floodgate answers the client itself: the default policy, 504 Gateway Timeout with an
        empty body. A timeout that only aborts a signal (AbortSignal.timeout() handed to your calls) answers
        nothing: the client hears back only if the handler throws and an error handler turns that into a
        response, often a 500, and never if the handler ignores the signal. Here the handler also stopped: its
        awaited step rejected at the abort, so it finished right after the answer (a few ms of overrun).`,
      );

      heard = expect('handler /cooperative');
      await giveUp(base, '/cooperative', 100);
      tour.requests++;
      sent('GET /cooperative again, and the client hangs up after 100 ms');
      line(await heard);
      why(
        `One signal, two reasons: a DOMException named TimeoutError at the deadline (someone is waiting for an
        answer, perhaps a partial one), AbortError when the client went away (nobody to answer; just
        stop). Read signal.reason: timers/promises rejects with its own AbortError either way, the reason as
        its cause.`,
      );

      overrun = expect('overrun /ignores');
      const [ignores] = await tour.send(base, { path: '/ignores' });
      sent('GET /ignores: the handler sleeps 1 s and never looks at its signal');
      got([ignores]);
      line(await overrun);
      why(
        `The client still has its 504 at 300 ms: the answer never waits for the handler. The handler's
        res.end() at 1 s is dropped without an error, but its work could not be taken back: onOverrun (and
        the floodgate.handler_overruns metric) tell you which routes need their signal passed on. Node's own
        server.requestTimeout (300 s by default) would not have helped: it bounds how long the client takes
        to send its request, answers 408 or closes the socket, and never stops a slow handler nor gives it a
        signal.`,
      );

      const result = expect('timeout /partial');
      const [partial] = await tour.send(base, { path: '/partial' });
      sent(`GET /partial: the handler answers from an 'abort' listener with what it has`);
      got([partial]);
      body(partial);
      line(await result);
      why(
        `'abort' listeners run synchronously at the deadline, before floodgate answers, and an answer sent
        there is kept: the policy does not override it. Only there: a catch after an awaited call comes
        after the policy's answer, and what it writes is dropped.`,
      );

      heard = expect('handler /report');
      const [report] = await tour.send(base, { path: '/report' });
      sent('GET /report: the handler calls requestTimeoutOf(req).disable() after 150 ms, answers at 600 ms');
      got([report]);
      line(await heard);
      why(
        `disable() stops this request's timeout (a long export, a report the handler knows is slow); it is
        too late once the deadline has passed. A route set up as slow from the start would say so with
        withTimeouts(handler, false) or a longer policy instead.`,
      );

      const [busy] = await tour.send(base, { path: '/maintenance' });
      sent(`GET /maintenance, whose route names the policy 'maintenance'`);
      line(`maintenance: { timeout: '200ms', status: 503, headers: { 'retry-after': '5' }, body: 'busy' }`);
      got([busy]);
      fields(busy, ['Retry-After', 'Content-Type']);
      body(busy);
      why(
        `A named policy sets its own deadline and answer. 503 with Retry-After tells clients and load
        balancers to come back in 5 s, where 504 says the server ran out of time. A string body without a
        content-type goes out as text/plain.`,
      );

      const queued = await tour.send(base, {
        path: '/queued',
        count: 4,
        headers: (i) => ({ 'x-tour-index': String(i) }),
      });
      sent(
        `4 × GET /queued at once: ${QUEUED_MS} ms of work each, one at a time (concurrency 1, a queue of 4)`,
      );
      got(queued);
      line(queued.map((a) => `#${a.index + 1} ${a.status} at ${Math.round(a.at)} ms`).join(', '));
      const sentAt = Math.min(...queued.map((a) => a.sentAt));
      tour.chart({
        kind: 'gantt',
        title: "Each request's wait in the queue and its work, against its 300 ms deadline",
        deadlineMs: 300,
        toMs: 400,
        rows: queued.map((a) => {
          const start = started.get(String(a.index));
          return {
            label: `#${a.index + 1}`,
            startMs: start === undefined ? undefined : start - sentAt,
            endMs: a.sentAt + a.ms - sentAt,
            status: a.status,
          };
        }),
      });
      why(
        `The deadline counts from when the timeouts wrapper saw the request, queue included, so install it
        first. #3 waited ${2 * QUEUED_MS} ms in the queue and had ${300 - 2 * QUEUED_MS} ms left for
        ${QUEUED_MS} ms of work; #4 was still queued at its deadline: it left the queue and got its 504 too.
        Waiting plus working never exceeds the budget.`,
      );
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  },
};
