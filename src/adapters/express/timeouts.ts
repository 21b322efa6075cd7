import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestTimeoutContext } from '../../http/timeouts/context.ts';
import { RequestTimeouts, type TimeoutAdapter } from '../../http/timeouts/engine.ts';
import { answerResponse, watchResponse } from '../../http/timeouts/node-response.ts';
import type { RequestTimeoutsOptions } from '../../http/timeouts/options.ts';
import { decidedBeforeTimeouts, warnMiddlewareOrder } from '../../http/timeouts/order.ts';
import { isAbortReason } from '../../http/timeouts/reasons.ts';
import { attachRequestTimeout, requestTimeoutOf } from '../../http/timeouts/registry.ts';
import type { RouteTimeout, TimeoutRouteSetting } from '../../http/timeouts/route.ts';
import { lookAhead } from './route-lookahead.ts';

export type { RequestTimeout } from '../../http/timeouts/context.ts';
export type { RouteTimeout, TimeoutPolicyOptions } from '../../http/timeouts/index.ts';
export { isTimeoutReason, requestTimeoutOf } from '../../http/timeouts/index.ts';
export type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from '../../http/timeouts/options.ts';

/** An Express (4 or 5) middleware, typed structurally so that `@types/express` is not required. */
export type ExpressMiddleware = (
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

/** The app-level middleware, with a route-level helper. Created by {@link requestTimeouts}. */
export interface ExpressTimeouts extends ExpressMiddleware {
  /**
   * A route-level middleware that sets the route's timeout: a duration, a policy name (checked now, so a typo
   * fails at startup), a policy object, or `false` to disable. It needs the app-level middleware installed
   * before it; if that is missing, the first request through this route fails with an error naming the fix.
   */
  route(setting: RouteTimeout): ExpressMiddleware;
  /**
   * An error middleware to install last (`app.use(timeouts.lateAborts)`): it swallows the abort errors that
   * handlers rethrow after their deadline (`fetch(url, { signal })` rejecting), which Express would otherwise
   * log and answer by closing the connection. Other errors pass on.
   */
  readonly lateAborts: (
    error: unknown,
    req: IncomingMessage,
    res: ServerResponse,
    next: (error?: unknown) => void,
  ) => void;
  /** The engine behind this middleware. */
  readonly engine: RequestTimeouts;
}

type ExpressRequest = IncomingMessage & {
  route?: { path?: unknown };
  baseUrl?: string;
  originalUrl?: string;
};

const kTimeoutMarker = Symbol('floodgate.timeoutMarker');
type TimeoutMarked = { [kTimeoutMarker]?: { engine: RequestTimeouts; setting: TimeoutRouteSetting } };

// The setting of an engine's marker on a handler, if it is one.
function settingOf(handle: unknown, engine: RequestTimeouts): TimeoutRouteSetting | undefined {
  const marker = (handle as TimeoutMarked | undefined)?.[kTimeoutMarker];
  return marker !== undefined && marker.engine === engine ? marker.setting : undefined;
}

const adapter: TimeoutAdapter = {
  expire: (context) => answerResponse(context.target as ServerResponse, context.current!),
  describe: (context) => {
    const req = (context.target as ServerResponse).req as ExpressRequest | undefined;
    const path = req?.route?.path;
    const route =
      typeof path === 'string'
        ? `${req?.baseUrl ?? ''}${path}`
        : (req?.originalUrl ?? req?.url)?.split('?', 1)[0];
    return { route, method: req?.method };
  },
  template: (context) => {
    const req = (context.target as ServerResponse).req as ExpressRequest | undefined;
    const path = req?.route?.path;
    return typeof path === 'string' ? `${req?.baseUrl ?? ''}${path}` : undefined;
  },
};

/**
 * Request timeouts for Express 4 and 5. Install the returned middleware with `app.use()` before routes and
 * rate limiting; set a route's timeout with `.route()`.
 *
 * @example
 * ```ts
 * const timeouts = requestTimeouts({ default: '5s', policies: { reports: '30s' } });
 * app.use(timeouts);
 * app.get('/reports/:id', timeouts.route('reports'), async (req, res) => {
 *   const { signal } = requestTimeoutOf(req)!;
 *   res.json(await buildReport(req.params.id, { signal }));
 * });
 * app.get('/export', timeouts.route(false), exportHandler);
 * ```
 */
export function requestTimeouts(options?: RequestTimeoutsOptions): ExpressTimeouts {
  const engine = new RequestTimeouts(options);
  let markers = 0;
  let warned = false;
  const middleware: ExpressMiddleware = (req, res, next) => {
    if ((requestTimeoutOf(req) as RequestTimeoutContext | undefined)?.engine !== engine) {
      if (!warned && decidedBeforeTimeouts(req)) warned = warnMiddlewareOrder();
      const context = engine.start(adapter, res);
      attachRequestTimeout(req, context);
      watchResponse(res, context);
      // The route's own timeout applies from here, not from its marker: a rate limiter between the two may
      // queue the request, and queue plus handler must stay within the route's budget.
      if (markers > 0) {
        const setting = lookAhead(req, engine, settingOf);
        if (setting !== undefined) context.apply(setting);
      }
    }
    next();
  };
  const route = (value: RouteTimeout): ExpressMiddleware => {
    const setting = engine.route(value, 'timeouts.route()');
    markers++;
    const handle: ExpressMiddleware & TimeoutMarked = (req, _res, next) => {
      const context = requestTimeoutOf(req) as RequestTimeoutContext | undefined;
      if (context?.engine !== engine) {
        next(
          new Error(
            'floodgate: timeouts.route() is on this route but the requestTimeouts middleware it belongs to did not ' +
              'run for the request; install it with app.use() before the routes',
          ),
        );
        return;
      }
      context.apply(setting);
      next();
    };
    handle[kTimeoutMarker] = { engine, setting };
    return handle;
  };
  const lateAborts: ExpressTimeouts['lateAborts'] = (error, req, _res, next) => {
    const context = requestTimeoutOf(req) as RequestTimeoutContext | undefined;
    // The handler's abort after the deadline is the expected end of its work, not a failure: the policy answers
    // (now, if this came within its grace).
    if (context?.engine === engine && context.timedOut && isAbortReason(error)) {
      context.gaveUp();
      return;
    }
    next(error);
  };
  return Object.assign(middleware, { route, lateAborts, engine });
}
