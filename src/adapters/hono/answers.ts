import type { ServerResponse } from 'node:http';
import type { Context } from 'hono';
import type { Decision, RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { Answers } from '../../http/rate-limiting/flow.ts';
import type { Answer } from '../../http/rate-limiting/response.ts';
import { requestTimeoutOf } from '../../http/timeouts/registry.ts';

/** How the rate-limiting flow answers on Hono: on the node response under `@hono/node-server`, else on web objects. */

/** The node response under `@hono/node-server`, or undefined on other runtimes. */
export function nodeOutgoing(c: Context): ServerResponse | undefined {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  return typeof outgoing?.on === 'function' ? outgoing : undefined;
}

// Queued requests wait with the request timeout's signal when there is one (it also aborts on disconnect),
// else with one that aborts when the node response closes early, else with the runtime's request signal.
function waitSignal(c: Context): AbortSignal | undefined {
  const timeout = requestTimeoutOf(c);
  if (timeout !== undefined) return timeout.signal;
  const outgoing = nodeOutgoing(c);
  if (outgoing === undefined) return c.req.raw.signal;
  const controller = new AbortController();
  const onClose = (): void => {
    if (!outgoing.writableFinished)
      controller.abort(new DOMException('The client disconnected', 'AbortError'));
  };
  if (outgoing.destroyed || outgoing.closed) onClose();
  else outgoing.once('close', onClose);
  return controller.signal;
}

// Under node-server the fields go on the node response, which merges them into whatever the route returns;
// c.header() would make Hono build a Headers object and leave node-server's fast path for every response.
function header(c: Context, name: string, value: string): void {
  const outgoing = nodeOutgoing(c);
  if (outgoing !== undefined) outgoing.setHeader(name, value);
  else c.header(name, value, { append: true });
}

// onRejected's Headers (which may hold several Set-Cookie fields) as they are; floodgate's own fields as a
// plain record, which keeps @hono/node-server's lightweight Response (a Headers object would leave it).
function send(c: Context, answer: Answer): void {
  if (answer.headers instanceof Headers) {
    c.res = new Response(answer.body, { status: answer.status, headers: answer.headers });
    return;
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of answer.headers) headers[name] = value;
  c.res = new Response(answer.body, { status: answer.status, headers });
}

export const contextAnswers: Answers<Context> = {
  signal: waitSignal,
  // Under node-server the permit comes back at the first of: the response written, the client gone, the
  // timeout answered (its answer is a response too); not when the route's promise settles.
  node: nodeOutgoing,
  timeout: (c) => c,
  info: (c, info) => c.set('rateLimit', info),
  header,
  sent: () => false,
  // onRejected may return its own Response.
  answeredBy: (c, outcome) => {
    if (!(outcome instanceof Response)) return false;
    c.res = outcome;
    return true;
  },
  send,
};

// Other runtimes show no response end: the permit comes back when the route settles or the client's or the
// timeout's signal aborts, and the refund rule reads the route's result (a route that threw, or a response of
// Hono's error handler, counts as failed: status 500).
export function runOnWeb(
  engine: RateLimiting,
  decision: Decision,
  c: Context,
  next: () => Promise<void>,
): Promise<void> {
  const release = (): void => engine.release(decision);
  if (decision.heldSince >= 0) {
    for (const signal of [c.req.raw.signal, requestTimeoutOf(c)?.signal]) {
      if (signal?.aborted) release();
      else signal?.addEventListener('abort', release, { once: true });
    }
  }
  const refund = decision.refundable;
  const costed = decision.route.cost !== undefined && decision.granted;
  let route: Promise<void>;
  try {
    route = next();
  } catch (error) {
    if (costed) engine.settleCost(decision, c, c);
    if (refund) engine.finished(decision, c, c, false, 500);
    release();
    throw error;
  }
  return route
    .then(
      () => {
        if (costed) engine.settleCost(decision, c, c);
        if (refund) engine.finished(decision, c, c, c.error === undefined, c.res.status);
      },
      (error: unknown) => {
        if (costed) engine.settleCost(decision, c, c);
        if (refund) engine.finished(decision, c, c, false, 500);
        throw error;
      },
    )
    .finally(release);
}
