import type { ServerResponse } from 'node:http';
import { describe } from '../../duration.ts';
import { timeoutGaveUp } from '../timeouts/registry.ts';
import type { Decision, RateLimiting } from './engine.ts';
import type { RateLimitInfo } from './info.ts';
import {
  holdUntilEnd,
  isThenable,
  refundWhenDone,
  setHeader,
  waitSignal,
  whenDone,
  writeRejection,
} from './node-http.ts';
import type { RejectedContext } from './options.ts';
import { type Answer, setLimitHeaders } from './response.ts';
import type { RouteLimits } from './route.ts';
import type { RouteMetrics } from './route-metrics.ts';

/**
 * The one decision flow every adapter runs: decide, then admit (header fields, the permit watched until the
 * response ends, the refund rule asked), answer a rejection (`onRejected`, else the 429), or give up on a request
 * that left the queue. The adapter maps the {@link Verdict} to its own continuation: `next()`, returning the
 * middleware's promise, a guard's `true`. A request goes adapter → engine → here → the framework's answer, once.
 */

/**
 * What became of a request: its `Decision` when admitted (the handler runs next), `'answered'` when a rejection
 * was sent (the adapter must end its own step: a Koa middleware resolves, Express calls nothing), `'canceled'`
 * when it left the queue (its client went away, or its timeout answered).
 */
export type Verdict = Decision | 'answered' | 'canceled';

/**
 * How one framework answers, as static functions over its per-request handle `H` (node's `ServerResponse`,
 * Fastify's reply, Koa's `ctx`, Hono's `Context`): made once per adapter, so deciding allocates nothing for them.
 */
export interface Answers<H> {
  /** The signal a queued request waits with (its timeout's, else one that aborts when the client goes away). */
  signal(h: H): AbortSignal | undefined;
  /** The node response under `h`, whose end releases a held permit; undefined on runtimes without one. */
  node(h: H): ServerResponse | undefined;
  /** Where the request's timeout is attached, told when the request leaves the queue at its deadline. */
  timeout(h: H): object;
  /** Puts the rate-limit info where the framework's handlers read it (`req.rateLimit`, `c.get('rateLimit')`). */
  info(h: H, info: RateLimitInfo): void;
  /** Sets one header field of an admitted request. */
  header(h: H, name: string, value: string): void;
  /** Whether the response's head is out already (no header field can be set). */
  sent(h: H): boolean;
  /** Whether `onRejected` answered by itself (`outcome` is what it returned). */
  answeredBy(h: H, outcome: unknown): boolean;
  /** Sends a rejection (Nest throws its exception here). */
  send(h: H, answer: Answer, decision: Decision): void;
}

const kDecided: unique symbol = Symbol.for('floodgate.rateLimited') as never;
// A decided request carries its route; the route's owner tells one engine's marks from another's.
type Decided = { [kDecided]?: RouteLimits };

/** One adapter's flow: its engine and its answers. */
export class Flow<H> {
  constructor(
    readonly engine: RateLimiting,
    readonly answers: Answers<H>,
  ) {}

  /**
   * The route this flow's engine already decided `holder` (the request, `ctx`, `Context`) with, if any: a
   * request is decided once, however many of one limiter's middleware and markers it meets.
   */
  prior(holder: object): RouteLimits | undefined {
    const route = (holder as Decided)[kDecided];
    return route !== undefined && route.owner === this.engine ? route : undefined;
  }

  /** Marks `holder` as decided with `route`. */
  mark(holder: object, route: RouteLimits): void {
    (holder as Decided)[kDecided] = route;
  }

  /**
   * Decides one request and answers it: synchronous (no Promise) when the engine's decision is and `onRejected`
   * does not return one. `request`/`response` are what hooks see; `h` is what {@link Answers} take. Throws (or
   * rejects) when a key function, `skip` or `onRejected` throws: nothing is charged then, and the framework's
   * error path should see it.
   */
  decide(
    route: RouteLimits,
    request: unknown,
    response: unknown,
    h: H,
    metrics?: RouteMetrics,
  ): Verdict | Promise<Verdict> {
    const decision = this.engine.decide(request, response, route, this.answers.signal, h, metrics);
    if (isThenable(decision)) return decision.then((d) => this.#proceed(d, request, response, h));
    return this.#proceed(decision, request, response, h);
  }

  #proceed(decision: Decision, request: unknown, response: unknown, h: H): Verdict | Promise<Verdict> {
    if (decision.result === 'canceled') {
      // Left the queue at its deadline (or the client left): the timeout answers now, without a handler's grace.
      timeoutGaveUp(this.answers.timeout(h));
      return 'canceled';
    }
    const lease = decision.lease;
    if (lease !== undefined) {
      this.answers.info(h, decision); // the decision is its own RateLimitInfo
      if (!lease.granted) return this.#reject(decision, request, response, h);
    }
    this.#admit(decision, request, response, h);
    return decision;
  }

  /** The header fields, and a held permit or a refund rule watched on the node response. */
  #admit(decision: Decision, request: unknown, response: unknown, h: H): void {
    const { engine, answers } = this;
    const options = engine.options;
    const lease = decision.lease;
    // An onUnavailable answer knows nothing of the limiters' state.
    if (
      lease !== undefined &&
      options.headers.length > 0 &&
      decision.result !== 'store_unavailable' &&
      !answers.sent(h)
    ) {
      setLimitHeaders(options, decision.route, decision.resource, lease, h, answers.header);
    }
    const refundable = decision.refundable;
    const costed = decision.route.cost !== undefined && lease?.granted === true;
    if (decision.heldSince < 0 && !refundable && !costed) return;
    const res = answers.node(h);
    if (res === undefined) return; // the adapter watches what its runtime offers
    holdUntilEnd(engine, res, decision);
    // Settled before the refund rule is asked: a settled cost stands, a refund gives back only an unsettled one.
    if (costed) whenDone(res, () => engine.settleCost(decision, request, response));
    if (refundable) refundWhenDone(engine, request, response, res, decision);
  }

  #reject(decision: Decision, request: unknown, response: unknown, h: H): Verdict | Promise<Verdict> {
    const engine = this.engine;
    const hook = decision.route.onRejected;
    if (hook === undefined) {
      if (engine.options.dryRun) return this.#dryRun(decision, request, response, h);
      this.answers.send(h, engine.rejection(decision), decision);
      return 'answered';
    }
    const context = engine.rejectedContext(decision, request, response);
    const outcome = hook(context);
    if (isThenable(outcome)) {
      return Promise.resolve(outcome).then((settled) =>
        this.#afterHook(settled, context, decision, request, response, h),
      );
    }
    return this.#afterHook(outcome, context, decision, request, response, h);
  }

  #afterHook(
    outcome: unknown,
    context: RejectedContext,
    decision: Decision,
    request: unknown,
    response: unknown,
    h: H,
  ): Verdict {
    if (this.engine.options.dryRun) return this.#dryRun(decision, request, response, h);
    if (!this.answers.answeredBy(h, outcome)) {
      if (typeof context.body !== 'string') jsonBody(context);
      this.answers.send(h, context as Answer, decision);
    }
    return 'answered';
  }

  // Dry-run: the rejection was reported (onRejected, metrics) and the request goes on as admitted.
  #dryRun(decision: Decision, request: unknown, response: unknown, h: H): Decision {
    this.#admit(decision, request, response, h);
    return decision;
  }
}

/**
 * An object `onRejected` gave as the body, sent as JSON (express-rate-limit's `message` does the same): with
 * `application/json` unless the hook chose a content type of its own. Anything else but a string is a
 * `TypeError`, on the framework's error path like a hook that throws.
 */
function jsonBody(context: RejectedContext): void {
  const body: unknown = context.body;
  if (body === null || typeof body !== 'object' || ArrayBuffer.isView(body)) {
    throw new TypeError(
      `onRejected: body must be a string, or an object to send as JSON; got ${describe(body)}`,
    );
  }
  context.body = JSON.stringify(body);
  const type = context.headers.get('content-type');
  if (type === null || type.startsWith('text/plain')) {
    context.headers.set('content-type', 'application/json; charset=utf-8');
  }
}

/**
 * A verdict for a callback-style framework (node:http, Express, Fastify): `next()` when admitted, nothing when
 * answered or canceled, `next(error)` when deciding threw. The callback is only wrapped when the flow waits.
 */
export function decideThen<H>(
  flow: Flow<H>,
  route: RouteLimits,
  request: unknown,
  response: unknown,
  h: H,
  next: (error?: unknown) => void,
  metrics?: RouteMetrics,
): void {
  let verdict: Verdict | Promise<Verdict>;
  try {
    verdict = flow.decide(route, request, response, h, metrics);
  } catch (error) {
    next(error);
    return;
  }
  if (typeof verdict === 'string') return;
  if (isThenable(verdict)) verdict.then((settled) => continueWith(settled, next), next);
  else next();
}

function continueWith(verdict: Verdict, next: (error?: unknown) => void): void {
  if (typeof verdict !== 'string') next();
}

/** node:http and Express: `h` is node's `ServerResponse` (and `res.req` its request). */
export const nodeAnswers: Answers<ServerResponse> = {
  signal: (res) => waitSignal(res.req, res),
  node: (res) => res,
  timeout: (res) => res.req,
  info: (res, info) => {
    (res.req as { rateLimit?: RateLimitInfo }).rateLimit = info;
  },
  header: setHeader,
  sent: (res) => res.headersSent,
  answeredBy: (res) => res.headersSent || res.destroyed,
  send: writeRejection,
};
