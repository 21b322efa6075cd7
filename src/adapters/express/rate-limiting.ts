import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import { RateLimiting } from '../../http/rate-limiting/engine.ts';
import { decideThen, Flow, nodeAnswers } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import type { RouteMetrics } from '../../http/rate-limiting/route-metrics.ts';
import { metricsRecorded } from '../../telemetry.ts';
import { CONFLICTING, conflictOnRoute, findMarker, kMarker, type Marked } from './route-lookahead.ts';
import type { ExpressMiddleware } from './timeouts.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteCost,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';

/**
 * Options of the Express `rateLimiting()`: every hook (a partitioned limiter's `key`, `onRejected`) sees Express's
 * `Request` and `Response`, with the application's own augmentation (`declare global { namespace Express {
 * interface Request { user?: User } } }`).
 */
export type ExpressRateLimitingOptions<Req = Request, Res = Response> = RateLimitingOptions<Req, Res>;

declare global {
  namespace Express {
    interface Request {
      /** This request's rate limit (the same numbers as its RateLimit fields); undefined when not limited. */
      rateLimit?: RateLimitInfo;
    }
  }
}

/** The app-level middleware and its route markers. Created by {@link rateLimiting}. */
export interface ExpressRateLimiting<Req = Request, Res = Response> extends ExpressMiddleware {
  /**
   * A route marker: this route is limited by the global limiter and the named policy (or an inline one), as one
   * all-or-nothing chain. The name is checked now, so a typo fails at startup.
   */
  requirePolicy(policy: string | Exclude<RouteLimit<Req, Res>, string | false>): ExpressMiddleware;
  /** A route marker: no rate limiting on this route, not even the global limiter. */
  noRateLimit(): ExpressMiddleware;
  /** The engine behind this middleware. */
  readonly engine: RateLimiting;
}

// Found before anything is decided, so that the request floodgate fails is not charged.
const conflict = (): Error =>
  new Error(
    'floodgate: two rate-limiting markers of one limiter apply to this route (the request would be already ' +
      'decided by the first); global and route policy must be decided together, so give the route one marker',
  );
// What Express sets once it has routed a request: the route's own path under the mount points matched.
type MatchedRequest = IncomingMessage & { route?: { stack?: never[]; path?: unknown }; baseUrl?: string };

/**
 * Rate limiting for Express 4 and 5. `app.use(limiter)` applies the global limiter to every request that
 * reaches it; route markers (`limiter.requirePolicy('name')`, `limiter.noRateLimit()`) set a route's policy.
 *
 * Global and route policy are decided together, once, whatever the order: the app-level middleware looks up the
 * route the request will reach (the same matching Express does, cached per method and path) and decides its
 * whole chain; a marker on a route the middleware did not run for decides the chain itself. A marker that finds
 * the request already decided without its policy (a middleware rewrote `req.url` in between) fails the request
 * rather than skip its policy. Put markers first among the route's handlers.
 *
 * @example
 * ```ts
 * const limiter = rateLimiting({
 *   global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
 *   policies: { login: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 5, window: '1m' }) }) },
 * });
 * app.use(limiter);
 * app.post('/login', limiter.requirePolicy('login'), login);
 * app.get('/health', limiter.noRateLimit(), health);
 * ```
 */
export function rateLimiting(options?: ExpressRateLimitingOptions): ExpressRateLimiting {
  const engine = new RateLimiting(options);
  const flow = new Flow(engine, nodeAnswers);
  let markers = 0;

  const decide = (
    route: RouteLimits,
    req: IncomingMessage,
    res: ServerResponse,
    next: (e?: unknown) => void,
    metrics?: RouteMetrics,
  ) => {
    flow.mark(req, route);
    if (route.unlimited) next();
    else decideThen(flow, route, req, res, res, next, metrics);
  };

  const middleware: ExpressMiddleware = (req, res, next) => {
    if (flow.prior(req) !== undefined) {
      next();
      return;
    }
    // Without markers the route ahead is looked up only to label the metrics (`http.route`).
    if (markers > 0 || metricsRecorded()) {
      const marker = findMarker(req, engine);
      if (marker === CONFLICTING) {
        next(conflict());
        return;
      }
      if (marker !== undefined) {
        decide(marker.route, req, res, next, marker.metrics);
        return;
      }
    }
    decide(engine.defaultRoute, req, res, next);
  };

  const marker = (route: RouteLimits): ExpressMiddleware => {
    markers++;
    const handle: ExpressMiddleware = (req, res, next) => {
      const prior = flow.prior(req);
      if (prior === undefined) {
        const matched = (req as MatchedRequest).route;
        if (conflictOnRoute(matched, engine)) next(conflict());
        else {
          const path = matched?.path;
          const template =
            typeof path === 'string' ? `${(req as MatchedRequest).baseUrl ?? ''}${path}` : undefined;
          decide(route, req, res, next, route.metricsFor(template));
        }
        return;
      }
      if (prior === route) {
        next();
        return;
      }
      next(
        new Error(
          `floodgate: this route requires rate-limiting policy ${JSON.stringify(route.policy?.name ?? 'none')} but the ` +
            'request was already decided without it (a middleware changed req.url, or two markers apply); ' +
            'global and route policy must be decided together',
        ),
      );
    };
    (handle as Marked)[kMarker] = { engine, route };
    return handle;
  };

  const requirePolicy = (
    policy: string | Exclude<RouteLimit<Request, Response>, string | false>,
  ): ExpressMiddleware => marker(engine.requiredRoute(policy));
  const noRateLimit = (): ExpressMiddleware => marker(engine.disabledRoute);

  return Object.assign(middleware, { requirePolicy, noRateLimit, engine });
}
