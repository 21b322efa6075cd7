import type { IncomingMessage, ServerResponse } from 'node:http';
import { RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { decideAndContinue, isThenable } from '../../http/rate-limiting/node-http.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import { callHandler, errorHandler, handlerRejected, type NodeErrorHandler, reportError } from './errors.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';

export type { NodeErrorHandler } from './errors.ts';

declare module 'node:http' {
  interface IncomingMessage {
    /** This request's rate limit (the same numbers as its RateLimit fields); undefined when not limited. */
    rateLimit?: RateLimitInfo;
  }
}

/**
 * Options of the node:http `rateLimiting()`: every hook (a partitioned limiter's `key`, `onRejected`) sees the
 * `IncomingMessage` and `ServerResponse` (or your subtypes: `rateLimiting<MyRequest>()`).
 */
export type NodeRateLimitingOptions<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
> = RateLimitingOptions<Req, Res> & {
  /**
   * Where a wrapped handler's error goes (a throw, a rejection, or a key function or `onRejected` that throws):
   * called with the error, the request and the response; the response is then ended, 500 if neither the hook
   * nor the handler sent anything. Default: `console.error(error)`. The error is never rethrown, so it cannot
   * become an unhandled rejection that ends the process.
   */
  onError?: NodeErrorHandler;
};

/** Wraps node:http handlers with rate limiting. Created by {@link rateLimiting}. */
export interface NodeRateLimiting {
  /**
   * Returns `handler` behind the global limiter chained with `route`'s policy: a policy name (checked now, so a
   * typo fails at startup), an inline policy, or `false` for no limiting. Wrap each route's handler once: a
   * request that an outer wrapper of the same `rateLimiting` already decided with another setting is answered
   * 500, since global and policy could no longer be decided as one.
   */
  <Req extends IncomingMessage, Res extends ServerResponse>(
    handler: (req: Req, res: Res) => unknown,
    route?: RouteLimit<IncomingMessage, ServerResponse>,
  ): (req: Req, res: Res) => void;
  /** The same as a connect-style middleware `(req, res, next)`. */
  middleware(
    route?: RouteLimit<IncomingMessage, ServerResponse>,
  ): (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;
  /** The engine behind this wrapper. */
  readonly engine: RateLimiting;
}

const kDecided = Symbol.for('floodgate.rateLimited');
// A decided request carries its route; the route's owner tells this engine's marks from another's.
type Marked = IncomingMessage & { [kDecided]?: RouteLimits };

/**
 * Rate limiting for node:http.
 *
 * @example
 * ```ts
 * const limit = rateLimiting({
 *   global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
 *   policies: { search: concurrency({ permitLimit: 4, queueLimit: 16 }) },
 * });
 * http.createServer(limit(router));            // or per route: limit(searchHandler, 'search')
 * ```
 */
export function rateLimiting(options?: NodeRateLimitingOptions): NodeRateLimiting;
/** With your request type (`rateLimiting<AuthedRequest>(…)`), hooks see it. */
export function rateLimiting<Req extends IncomingMessage, Res extends ServerResponse = ServerResponse>(
  options?: NodeRateLimitingOptions<Req, Res>,
): NodeRateLimiting;
export function rateLimiting(options?: NodeRateLimitingOptions): NodeRateLimiting {
  const { onError: hook, ...rest } = (options ?? {}) as NodeRateLimitingOptions;
  const engine = new RateLimiting(rest as RateLimitingOptions);
  const onError = errorHandler('rateLimiting', hook);

  const gate = (
    route: RouteLimits,
    req: IncomingMessage,
    res: ServerResponse,
    next: (error?: unknown) => void,
  ): void => {
    const prior = (req as Marked)[kDecided];
    if (prior !== undefined && prior.owner === engine) {
      if (route === prior || route === engine.defaultRoute) next();
      else
        next(
          new Error(
            'floodgate: this request was already rate-limited by an outer wrapper with another setting; wrap each route once',
          ),
        );
      return;
    }
    (req as Marked)[kDecided] = route;
    decideAndContinue(engine, route, req, res, next);
  };

  const wrap = <Req extends IncomingMessage, Res extends ServerResponse>(
    handler: (req: Req, res: Res) => unknown,
    setting?: RouteLimit<IncomingMessage, ServerResponse>,
  ): ((req: Req, res: Res) => void) => {
    if (typeof handler !== 'function') {
      throw new TypeError(`rateLimiting(): the handler must be a function; got ${typeof handler}`);
    }
    const route = engine.route(setting, 'rateLimiting() route');
    return (req, res) => {
      gate(route, req, res, (error) => {
        if (error !== undefined) {
          reportError(onError, error, req, res);
          return;
        }
        run(handler, req, res, onError);
      });
    };
  };

  const middleware = (setting?: RouteLimit<IncomingMessage, ServerResponse>) => {
    const route = engine.route(setting, 'rateLimiting.middleware()');
    return (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) =>
      gate(route, req, res, next);
  };

  return Object.assign(wrap, { middleware, engine }) as NodeRateLimiting;
}

// A handler that throws must not keep its permit: the response is ended (500 when nothing was sent), so a
// concurrency lease comes back, and the error goes to onError. Never rethrown: when the request waited in a queue
// this runs in a promise callback, where a rethrow is an unhandled rejection that ends the process.
function run<Req extends IncomingMessage, Res extends ServerResponse>(
  handler: (req: Req, res: Res) => unknown,
  req: Req,
  res: Res,
  onError: NodeErrorHandler,
): void {
  const result = callHandler(handler, req, res, onError);
  if (isThenable(result))
    result.then(undefined, (error: unknown) => handlerRejected(onError, error, req, res));
}
