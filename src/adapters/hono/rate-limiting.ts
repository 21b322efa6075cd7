import type { Context, Env, MiddlewareHandler } from 'hono';
import { metricsRecorded, RateLimiting } from '../../http/rate-limiting/engine.ts';
import { Flow, type Verdict } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { isThenable } from '../../http/rate-limiting/node-http.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import { contextAnswers, nodeOutgoing, runOnWeb } from './answers.ts';
import {
  conflict,
  type Matched,
  markedRoute,
  markHandler,
  metricsOf,
  NO_ROUTES,
  templateIn,
} from './markers.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteCost,
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

/**
 * The template of the route a request will reach (`'/posts/:id'`), for a key per route: the same route floodgate
 * labels its metrics with (`http.route`). The key runs in the app-level middleware, where Hono's
 * `c.req.routePath` is the middleware's own (`'/*'`); this reads the handlers Hono matched instead, skipping
 * middleware (`app.use`, and so `app.all` routes too). Undefined when no route matched (a 404). Hono builds the
 * matched list on each call: call it only in key functions that need it.
 *
 * @example
 * ```ts
 * partitioned({ key: (c) => `${routeTemplate(c) ?? 'none'} ${ip(c)}`, limiter: fixedWindow({ permitLimit: 10, window: '1m' }) })
 * ```
 */
export function routeTemplate(c: Context): string | undefined {
  return templateIn(c.req.matchedRoutes);
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
    const verdict = flow.decide(route, c, c, c, metricsOf(engine, route, matched));
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
    if (
      (verdict.heldSince >= 0 || verdict.refundable || verdict.route.cost !== undefined) &&
      nodeOutgoing(c) === undefined
    ) {
      return runOnWeb(engine, verdict, c, next);
    }
    return next();
  };

  const middleware: MiddlewareHandler = (c, next) => {
    if (flow.prior(c) !== undefined) return next();
    // Hono builds this array on every read: read once, and only when a marker may apply or metrics want the
    // route template.
    const matched = markers > 0 || metricsRecorded() ? c.req.matchedRoutes : NO_ROUTES;
    let route = engine.defaultRoute;
    if (markers > 0) {
      const marked = markedRoute(engine, matched);
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
        if (markedRoute(engine, matched) === null) throw conflict();
        return decide(route, c, next, matched);
      }
      if (prior === route) return next();
      throw new Error(
        `floodgate: this route requires rate-limiting policy ${JSON.stringify(route.policy?.name ?? 'none')} but the ` +
          'request was already decided by another marker; global and route policy must be decided together',
      );
    };
    markHandler(handle, engine, route);
    return handle;
  };

  const requirePolicy = (policy: string | Exclude<RouteLimit<Context<E>, Context<E>>, string | false>) =>
    marker(engine.requiredRoute(policy));
  const noRateLimit = (): MiddlewareHandler => marker(engine.disabledRoute);

  return Object.assign(middleware, { requirePolicy, noRateLimit, engine }) as unknown as HonoRateLimiting<E>;
}
