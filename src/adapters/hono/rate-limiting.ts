import type { ServerResponse } from 'node:http';
import type { Context, Env, MiddlewareHandler } from 'hono';
import { type Decision, metricsRecorded, RateLimiting } from '../../http/rate-limiting/engine.ts';
import { type Answers, Flow, type Verdict } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { isThenable } from '../../http/rate-limiting/node-http.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { Answer } from '../../http/rate-limiting/response.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import type { RouteMetrics } from '../../http/rate-limiting/route-metrics.ts';
import { requestTimeoutOf } from '../../http/timeouts/registry.ts';
import { throughComposed } from './composed.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';

declare module 'hono' {
  interface ContextVariableMap {
    /** This request's rate limit (the same numbers as its RateLimit fields); unset when not limited. */
    rateLimit: RateLimitInfo;
  }
}

/**
 * Options of the Hono `rateLimiting()`: every hook (a partitioned limiter's `key`, `onRejected`) sees the
 * `Context`, as request and response; `rateLimiting<{ Variables: { user?: User } }>()` types `c.get('user')`.
 */
// biome-ignore lint/suspicious/noExplicitAny: Hono's own default Env
export type HonoRateLimitingOptions<E extends Env = any> = RateLimitingOptions<Context<E>, Context<E>>;

/** The app-level middleware and its route markers. Created by {@link rateLimiting}. */
// biome-ignore lint/suspicious/noExplicitAny: Hono's own default Env
export interface HonoRateLimiting<E extends Env = any> extends MiddlewareHandler<E> {
  /**
   * A route marker: this route is limited by the global limiter and the named policy (or an inline one), as one
   * all-or-nothing chain. The name is checked now, so a typo fails at startup.
   */
  requirePolicy(
    policy: string | Exclude<RouteLimit<Context<E>, Context<E>>, string | false>,
  ): MiddlewareHandler<E>;
  /** A route marker: no rate limiting on this route, not even the global limiter. */
  noRateLimit(): MiddlewareHandler<E>;
  /** The engine behind this middleware. */
  readonly engine: RateLimiting;
}

const kMarker: unique symbol = Symbol.for('floodgate.rateLimitMarker') as never;
type Matched = Context['req']['matchedRoutes'][number];
const NO_ROUTES: readonly Matched[] = [];
type Marked = { [kMarker]?: { engine: RateLimiting; route: RouteLimits } };
// The marker a matched handler carries, looking through Hono's wrappers of sub-apps with their own onError.
function markerOf(handler: unknown): Marked[typeof kMarker] {
  return throughComposed(handler, readMarker);
}

function readMarker(handler: object): Marked[typeof kMarker] {
  return (handler as Marked)[kMarker];
}

function nodeOutgoing(c: Context): ServerResponse | undefined {
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

const contextAnswers: Answers<Context> = {
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
function runOnWeb(
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
  let route: Promise<void>;
  try {
    route = next();
  } catch (error) {
    if (refund) engine.finished(decision, c, c, false, 500);
    release();
    throw error;
  }
  return route
    .then(
      () => {
        if (refund) engine.finished(decision, c, c, c.error === undefined, c.res.status);
      },
      (error: unknown) => {
        if (refund) engine.finished(decision, c, c, false, 500);
        throw error;
      },
    )
    .finally(release);
}

/**
 * Rate limiting for Hono 4, on web `Request`/`Response`. `app.use(limiter)` applies the global limiter; route
 * markers (`limiter.requirePolicy('name')`, `limiter.noRateLimit()`) set a route's policy. Hono matches every
 * handler of a request before running the first, so the app-level middleware sees the route's marker and decides
 * global and policy as one chain; a marker on a route the middleware does not run for decides the chain itself.
 * Under `@hono/node-server` a held (concurrency) permit comes back when the response has been written or the
 * client went away, whichever is first, even if the handler never settles; elsewhere when the handler returns or
 * the request's (or its timeout's) signal aborts.
 *
 * @example
 * ```ts
 * const limiter = rateLimiting({ global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
 *   policies: { search: concurrency({ permitLimit: 4, queueLimit: 16 }) } });
 * app.use(limiter);
 * app.get('/search', limiter.requirePolicy('search'), (c) => c.json(search(c.req.query('q'))));
 * ```
 */
export function rateLimiting(options?: HonoRateLimitingOptions): HonoRateLimiting;
/** With your app's `Env` (`rateLimiting<{ Variables: { user?: User } }>(…)`), `c.get()` in hooks is typed. */
export function rateLimiting<E extends Env>(options?: HonoRateLimitingOptions<E>): HonoRateLimiting<E>;
export function rateLimiting<E extends Env>(options?: HonoRateLimitingOptions<E>): HonoRateLimiting<E> {
  const engine = new RateLimiting(options);
  const flow = new Flow(engine, contextAnswers);
  let markers = 0;

  // Synchronous until something has to wait: most requests are decided without a Promise of floodgate's own.
  const decide = (
    route: RouteLimits,
    c: Context,
    next: () => Promise<void>,
    matched: readonly Matched[],
  ): Promise<Response | void> => {
    flow.mark(c, route);
    if (route.unlimited) return next();
    const verdict = flow.decide(route, c, c, c, metricsOf(route, matched));
    if (isThenable(verdict)) return verdict.then((settled) => continueWith(settled, c, next));
    return continueWith(verdict, c, next);
  };

  const continueWith = (
    verdict: Verdict,
    c: Context,
    next: () => Promise<void>,
  ): Promise<Response | void> => {
    if (verdict === 'answered') return Promise.resolve();
    // The timeout answered: the context needs a response of its own, which node-server does not write.
    if (verdict === 'canceled') return Promise.resolve(new Response(null, { status: 499 }));
    if ((verdict.heldSince >= 0 || verdict.refundable) && nodeOutgoing(c) === undefined) {
      return runOnWeb(engine, verdict, c, next);
    }
    return next();
  };

  // The route limits of this engine's marker among the handlers Hono matched; `null` when two of its markers
  // disagree, which is found before anything is decided so that the failing request is never charged.
  const markedRoute = (routes: readonly Matched[]): RouteLimits | null | undefined => {
    let found: RouteLimits | undefined;
    for (const matched of routes) {
      const marker = markerOf(matched.handler);
      if (marker === undefined || marker.engine !== engine) continue;
      if (found !== undefined && found !== marker.route) return null;
      found = marker.route;
    }
    return found;
  };

  const conflict = (): Error =>
    new Error(
      'floodgate: two rate-limiting markers of one limiter apply to this route (the request would be already ' +
        'decided by the first); global and route policy must be decided together, so give the route one marker',
    );

  // The route template for `http.route`: the path of this engine's marker deciding `route`, else of the last
  // route matched with a method (the handler's, not an `app.use()` pattern); none for a request no route matched.
  const metricsOf = (route: RouteLimits, routes: readonly Matched[]): RouteMetrics => {
    let template: string | undefined;
    // No marker decides the global limiter alone.
    const marked = route !== engine.defaultRoute;
    for (const matched of routes) {
      if (marked) {
        const marker = markerOf(matched.handler);
        if (marker?.engine === engine && marker.route === route) return route.metricsFor(matched.path);
      }
      if (matched.method !== 'ALL') template = matched.path;
    }
    return route.metricsFor(template);
  };

  const middleware: MiddlewareHandler = (c, next) => {
    if (flow.prior(c) !== undefined) return next();
    // Hono builds this array on every read: read once, and only when a marker may apply or metrics want the
    // route template.
    const matched = markers > 0 || metricsRecorded() ? c.req.matchedRoutes : NO_ROUTES;
    let route = engine.defaultRoute;
    if (markers > 0) {
      const marked = markedRoute(matched);
      if (marked === null) throw conflict();
      if (marked !== undefined) route = marked;
    }
    return decide(route, c, next, matched);
  };

  const marker = (route: RouteLimits): MiddlewareHandler => {
    markers++;
    const handle: MiddlewareHandler = (c, next) => {
      const prior = flow.prior(c);
      if (prior === undefined) {
        const matched = c.req.matchedRoutes;
        if (markedRoute(matched) === null) throw conflict();
        return decide(route, c, next, matched);
      }
      if (prior === route) return next();
      throw new Error(
        `floodgate: this route requires rate-limiting policy ${JSON.stringify(route.policy?.name ?? 'none')} but the ` +
          'request was already decided by another marker; global and route policy must be decided together',
      );
    };
    (handle as Marked)[kMarker] = { engine, route };
    return handle;
  };

  const requirePolicy = (policy: string | Exclude<RouteLimit<Context<E>, Context<E>>, string | false>) =>
    marker(engine.requiredRoute(policy));
  const noRateLimit = (): MiddlewareHandler => marker(engine.disabledRoute);

  return Object.assign(middleware, { requirePolicy, noRateLimit, engine }) as unknown as HonoRateLimiting<E>;
}
