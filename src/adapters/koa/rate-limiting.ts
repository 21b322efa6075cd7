import type { DefaultContext, DefaultState, Middleware, Next, ParameterizedContext } from 'koa';
import { RateLimiting } from '../../http/rate-limiting/engine.ts';
import { Flow } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { isThenable } from '../../http/rate-limiting/node-http.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import type { RouteMetrics } from '../../http/rate-limiting/route-metrics.ts';
import { type Ctx, continueWith, ctxAnswers } from './answers.ts';
import { findMarker, kMarker, type Marked, markerIn } from './route-lookahead.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteCost,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';

declare module 'koa' {
  interface DefaultState {
    /** This request's rate limit (the same numbers as its RateLimit fields); undefined when not limited. */
    rateLimit?: RateLimitInfo;
  }
}

/** Koa's context as hooks see it: `ctx.state` typed by your app's `State` (`ctx.state.user` from your auth). */
export type KoaContext<State = DefaultState, Custom = DefaultContext> = ParameterizedContext<State, Custom>;

/**
 * Options of the Koa `rateLimiting()`: every hook (a partitioned limiter's `key`, `skip`, `requestWasSuccessful`,
 * `onRejected`) receives Koa's `ctx`, as request and response. `rateLimiting<{ user?: User }>()` types
 * `ctx.state.user` in them.
 */
export type KoaRateLimitingOptions<State = DefaultState, Custom = DefaultContext> = RateLimitingOptions<
  KoaContext<State, Custom>,
  KoaContext<State, Custom>
>;

/** The app-level middleware and its route markers. Created by {@link rateLimiting}. */
export interface KoaRateLimiting<State = DefaultState, Custom = DefaultContext>
  extends Middleware<State, Custom> {
  /**
   * A route marker for `@koa/router`: this route is limited by the global limiter and the named policy (or an
   * inline one), as one all-or-nothing chain. The name is checked now, so a typo fails at startup.
   */
  requirePolicy(
    policy:
      | string
      | Exclude<RouteLimit<KoaContext<State, Custom>, KoaContext<State, Custom>>, string | false>,
  ): Middleware<State, Custom>;
  /** A route marker: no rate limiting on this route, not even the global limiter. */
  noRateLimit(): Middleware<State, Custom>;
  /** The engine behind this middleware. */
  readonly engine: RateLimiting;
}

// `@koa/router` sets the matched layer's path (its template) before running the layer's middleware.
type Routed = { _matchedRoute?: unknown };

function templateOf(path: unknown): string | undefined {
  return typeof path === 'string' ? path : undefined;
}

/**
 * Rate limiting for Koa 2 and 3. `app.use(limiter)` applies the global limiter to every request that reaches
 * it; route markers on `@koa/router` routes (`limiter.requirePolicy('name')`, `limiter.noRateLimit()`) set a
 * route's policy.
 *
 * Global and route policy are decided together, once, whatever the order: the app-level middleware asks the
 * app's routers which route the request will reach and decides its whole chain; a marker on a route the
 * middleware did not run for decides the chain itself. A marker that finds the request already decided without
 * its policy fails the request rather than skip its policy.
 *
 * A rejection answers without calling `next()`. An admitted request awaits `next()`; a held (concurrency) permit
 * comes back when the response has been written or the client went away, not when the middleware chain
 * settles. A key function or hook that throws fails the request through Koa's error handling (500, the app's
 * `'error'` event); nothing is charged. `ctx.state.rateLimit` carries the request's numbers.
 *
 * @example
 * ```ts
 * const limiter = rateLimiting({
 *   global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
 *   policies: { login: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 5, window: '1m' }) }) },
 * });
 * app.use(limiter);
 * router.post('/login', limiter.requirePolicy('login'), login);
 * router.get('/health', limiter.noRateLimit(), health);
 * app.use(router.routes());
 * ```
 */
export function rateLimiting(options?: KoaRateLimitingOptions): KoaRateLimiting;
/** With your app's state (`rateLimiting<{ user?: User }>(…)`), `ctx.state` in hooks is typed. */
export function rateLimiting<State, Custom = DefaultContext>(
  options?: KoaRateLimitingOptions<State, Custom>,
): KoaRateLimiting<State, Custom>;
export function rateLimiting<State, Custom>(
  options?: KoaRateLimitingOptions<State, Custom>,
): KoaRateLimiting<State, Custom> {
  const engine = new RateLimiting(options);
  const flow = new Flow(engine, ctxAnswers);
  let markers = 0;

  // Synchronous until something has to wait: most requests are decided without a Promise of floodgate's own.
  const decide = (route: RouteLimits, ctx: Ctx, next: Next, metrics?: RouteMetrics): Promise<unknown> => {
    flow.mark(ctx, route);
    if (route.unlimited) return next();
    const verdict = flow.decide(route, ctx, ctx, ctx, metrics);
    if (isThenable(verdict)) return verdict.then((settled) => continueWith(settled, next));
    return continueWith(verdict, next);
  };

  const middleware = (ctx: Ctx, next: Next): Promise<unknown> => {
    if (flow.prior(ctx) !== undefined) return next();
    if (markers > 0) {
      const layer = findMarker(ctx as never, engine);
      const route = layer === undefined ? undefined : markerIn(layer, engine);
      if (route !== undefined) {
        return decide(route, ctx, next, route.metricsFor(templateOf(layer!.path)));
      }
    }
    return decide(engine.defaultRoute, ctx, next);
  };

  const marker = (route: RouteLimits): Middleware<State, Custom> => {
    markers++;
    const handle = (ctx: Ctx, next: Next): Promise<unknown> => {
      const prior = flow.prior(ctx);
      if (prior === undefined) {
        return decide(route, ctx, next, route.metricsFor(templateOf((ctx as Routed)._matchedRoute)));
      }
      if (prior === route) return next();
      throw new Error(
        `floodgate: this route requires rate-limiting policy ${JSON.stringify(route.policy?.name ?? 'none')} but the ` +
          'request was already decided without it (a middleware changed the path, or two markers apply); ' +
          'global and route policy must be decided together',
      );
    };
    (handle as Marked)[kMarker] = { engine, route };
    return handle as unknown as Middleware<State, Custom>;
  };

  const requirePolicy = (
    policy:
      | string
      | Exclude<RouteLimit<KoaContext<State, Custom>, KoaContext<State, Custom>>, string | false>,
  ) => marker(engine.requiredRoute(policy));
  const noRateLimit = () => marker(engine.disabledRoute);

  return Object.assign(middleware, { requirePolicy, noRateLimit, engine }) as unknown as KoaRateLimiting<
    State,
    Custom
  >;
}
