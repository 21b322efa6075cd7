import type { IncomingMessage, ServerResponse } from 'node:http';
import { RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { decideAndContinue, isThenable } from '../../http/rate-limiting/node-http.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import { isAbortReason } from '../../http/timeouts/reasons.ts';
import { requestTimeoutOf } from '../../http/timeouts/registry.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';

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
> = RateLimitingOptions<Req, Res>;

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
  const engine = new RateLimiting(options);

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
          fail(res, error);
          return;
        }
        run(handler, req, res);
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
// concurrency lease comes back, and the error goes on as it would without floodgate.
function run<Req extends IncomingMessage, Res extends ServerResponse>(
  handler: (req: Req, res: Res) => unknown,
  req: Req,
  res: Res,
): void {
  let result: unknown;
  try {
    result = handler(req, res);
  } catch (error) {
    fail(res, error);
    throw error;
  }
  if (isThenable(result)) {
    result.then(undefined, (error: unknown) => {
      fail(res, error);
      // Inside requestTimeouts, a handler rethrowing its own abort after the timeout answered did nothing wrong
      // (the timeouts wrapper cannot see this promise: it sees ours). Anything else stays unhandled, as it would be
      // without floodgate.
      if (requestTimeoutOf(req)?.timedOut && isAbortReason(error)) return;
      throw error;
    });
  }
}

function fail(res: ServerResponse, error: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body =
    error instanceof Error && error.message.startsWith('floodgate:')
      ? error.message
      : 'Internal Server Error';
  res.writeHead(500, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
