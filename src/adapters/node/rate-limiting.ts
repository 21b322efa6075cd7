import type { IncomingMessage, ServerResponse } from 'node:http';
import { RateLimiting } from '../../http/rate-limiting/engine.ts';
import { decideThen, Flow, nodeAnswers, type Verdict } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { isThenable } from '../../http/rate-limiting/node-http.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import { callHandler, errorHandler, handlerRejected, type NodeErrorHandler, reportError } from './errors.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteCost,
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

// Passed: an outer wrapper of the same engine decided this request with the same setting.
const SAME = { passed: true } as const;
type Gate = Verdict | typeof SAME;

const decidedElsewhere = (): Error =>
  new Error(
    'floodgate: this request was already rate-limited by an outer wrapper with another setting; wrap each route once',
  );

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

  const flow = new Flow(engine, nodeAnswers);

  // A request an outer wrapper of this engine decided passes when it was decided with this route (or this one
  // asks for the global limiter alone): `SAME`.
  const gate = (route: RouteLimits, req: IncomingMessage, res: ServerResponse): Gate | Promise<Verdict> => {
    const prior = flow.prior(req);
    if (prior === undefined) {
      flow.mark(req, route);
      return flow.decide(route, req, res, res);
    }
    if (route === prior || route === engine.defaultRoute) return SAME;
    throw decidedElsewhere();
  };

  const wrap = <Req extends IncomingMessage, Res extends ServerResponse>(
    handler: (req: Req, res: Res) => unknown,
    setting?: RouteLimit<IncomingMessage, ServerResponse>,
  ): ((req: Req, res: Res) => void) => {
    if (typeof handler !== 'function') {
      throw new TypeError(`rateLimiting(): the handler must be a function; got ${typeof handler}`);
    }
    const route = engine.route(setting, 'rateLimiting() route');
    // No closure per request unless the decision waits.
    return (req, res) => {
      let verdict: Gate | Promise<Verdict>;
      try {
        verdict = gate(route, req, res);
      } catch (error) {
        reportError(onError, error, req, res);
        return;
      }
      if (typeof verdict === 'string') return;
      if (!isThenable(verdict)) {
        run(handler, req, res, onError);
        return;
      }
      verdict.then(
        (settled) => {
          if (typeof settled !== 'string') run(handler, req, res, onError);
        },
        (error: unknown) => reportError(onError, error, req, res),
      );
    };
  };

  const middleware = (setting?: RouteLimit<IncomingMessage, ServerResponse>) => {
    const route = engine.route(setting, 'rateLimiting.middleware()');
    return (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => {
      const prior = flow.prior(req);
      if (prior === undefined) {
        flow.mark(req, route);
        decideThen(flow, route, req, res, res, next);
      } else if (route === prior || route === engine.defaultRoute) next();
      else next(decidedElsewhere());
    };
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
