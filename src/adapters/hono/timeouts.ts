import type { ServerResponse } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';
import type { RequestTimeout, RequestTimeoutContext } from '../../http/timeouts/context.ts';
import { RequestTimeouts, type TimeoutAdapter } from '../../http/timeouts/engine.ts';
import { watchResponse } from '../../http/timeouts/node-response.ts';
import type { RequestTimeoutsOptions } from '../../http/timeouts/options.ts';
import { decidedBeforeTimeouts, warnMiddlewareOrder } from '../../http/timeouts/order.ts';
import { isAbortReason } from '../../http/timeouts/reasons.ts';
import { attachRequestTimeout, requestTimeoutOf } from '../../http/timeouts/registry.ts';
import type { RouteTimeout, TimeoutRouteSetting } from '../../http/timeouts/route.ts';
import { policyResponse } from '../../http/timeouts/web-response.ts';
import { throughComposed } from './composed.ts';

export type { RequestTimeout } from '../../http/timeouts/context.ts';
export type { RouteTimeout, TimeoutPolicyOptions } from '../../http/timeouts/index.ts';
export { isTimeoutReason, requestTimeoutOf } from '../../http/timeouts/index.ts';
export type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from '../../http/timeouts/options.ts';

declare module 'hono' {
  interface ContextVariableMap {
    /** The request's timeout (its `signal`, `deadline`, `disable()`), set by the timeouts middleware. */
    requestTimeout: RequestTimeout;
  }
}

/** The app-level middleware, with a route-level helper. Created by {@link requestTimeouts}. */
export interface HonoTimeouts extends MiddlewareHandler {
  /**
   * A route-level middleware that sets the route's timeout: a duration, a policy name (checked now, so a typo
   * fails at startup), a policy object, or `false` to disable. It needs the app-level middleware before it;
   * if that is missing, the first request through this route fails with an error naming the fix.
   */
  route(setting: RouteTimeout): MiddlewareHandler;
  /** The engine behind this middleware. */
  readonly engine: RequestTimeouts;
}

const kTimeoutMarker = Symbol('floodgate.timeoutMarker');
type TimeoutMarked = { [kTimeoutMarker]?: { engine: RequestTimeouts; setting: TimeoutRouteSetting } };

function readMarker(handler: object): TimeoutMarked[typeof kTimeoutMarker] {
  return (handler as TimeoutMarked)[kTimeoutMarker];
}

/** What the adapter keeps per request. */
class HonoRequest {
  /** Settles the middleware; `undefined` once it has (route done, or answered at the deadline). */
  resolve: (() => void) | undefined;
  reject: ((error: unknown) => void) | undefined;
  context!: RequestTimeoutContext;

  constructor(
    readonly c: Context,
    /** The node response under `@hono/node-server`, which lets a started body be cut at the deadline. */
    readonly outgoing: ServerResponse | undefined,
  ) {}

  /** The route settled: the handler is done, and unless the deadline answered first, its result stands. */
  settled(error: unknown, failed: boolean): void {
    this.context.handlerDone();
    // Within a grace, a handler that rethrew its abort (Hono's onError saw it, `c.error`) did not answer: the
    // policy does, now.
    if (this.context.expired && isAbortReason(failed ? error : this.c.error)) {
      this.context.gaveUp();
      return;
    }
    const { resolve, reject } = this;
    if (resolve === undefined) return;
    this.resolve = this.reject = undefined;
    // No node response to watch for the end of the body: the request ends with the route.
    if (this.outgoing === undefined) this.context.responseClosed(true);
    if (failed) reject!(error);
    else resolve();
  }

  /** The deadline passed with the route still running: answer now. Returns false if the route had settled. */
  answer(): boolean {
    const resolve = this.resolve;
    if (resolve === undefined) return false;
    this.resolve = this.reject = undefined;
    // The route keeps running; what it returns later is ignored by Hono, since the context is finalized.
    this.c.res = policyResponse(this.context.current!);
    resolve();
    return true;
  }
}

const adapter: TimeoutAdapter = {
  expire: (context) => {
    const state = context.target as HonoRequest;
    // The route still running means nothing was sent: answer with the policy.
    if (state.answer()) return 'answered';
    const out = state.outgoing;
    if (out?.headersSent && !out.writableEnded && !out.destroyed) {
      // The route returned a streaming body that is still being written: close the connection.
      out.destroy();
      return 'cut';
    }
    return 'handler';
  },
  describe: (context) => {
    const { c } = context.target as HonoRequest;
    return { route: c.req.routePath, method: c.req.method };
  },
  template: (context) => (context.target as HonoRequest).c.req.routePath,
};

function nodeOutgoing(c: Context): ServerResponse | undefined {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  return typeof outgoing?.on === 'function' && typeof outgoing.writeHead === 'function'
    ? outgoing
    : undefined;
}

/**
 * Request timeouts for Hono 4, on web `Request`/`Response`. Under `@hono/node-server` it also notices client
 * disconnects and cuts streaming bodies at the deadline from the node response; on other runtimes the
 * disconnect comes from `c.req.raw.signal` and a body that has started streaming is not cut.
 *
 * @example
 * ```ts
 * const timeouts = requestTimeouts({ default: '5s', policies: { reports: '30s' } });
 * app.use(timeouts);
 * app.get('/reports/:id', timeouts.route('reports'), async (c) => {
 *   return c.json(await buildReport(c.req.param('id'), { signal: c.var.requestTimeout.signal }));
 * });
 * ```
 */
export function requestTimeouts(options?: RequestTimeoutsOptions): HonoTimeouts {
  const engine = new RequestTimeouts(options);
  let markers = 0;
  let warned = false;

  // Not an async function: one promise per request, settled by the route or by the deadline, whichever is first.
  const middleware: MiddlewareHandler = (c, next) => {
    if ((requestTimeoutOf(c) as RequestTimeoutContext | undefined)?.engine === engine) return next();
    if (!warned && decidedBeforeTimeouts(c)) warned = warnMiddlewareOrder();
    const outgoing = nodeOutgoing(c);
    const state = new HonoRequest(c, outgoing);
    const context = engine.start(adapter, state);
    state.context = context;
    context.doneByPromise = true;
    attachRequestTimeout(c, context);
    c.set('requestTimeout', context);
    if (outgoing !== undefined) watchResponse(outgoing, context);
    else linkClientSignal(c, context);
    // The route's own timeout applies from here, not from its marker: a rate limiter between the two may queue
    // the request, and queue plus handler must stay within the route's budget. Hono matched every handler already.
    if (markers > 0) {
      for (const matched of c.req.matchedRoutes) {
        const marker = throughComposed(matched.handler, readMarker);
        if (marker !== undefined && marker.engine === engine) {
          context.apply(marker.setting);
          break;
        }
      }
    }
    return new Promise<void>((resolve, reject) => {
      state.resolve = resolve;
      state.reject = reject;
      next().then(
        () => state.settled(undefined, false),
        (error: unknown) => state.settled(error, true),
      );
    });
  };

  const route = (value: RouteTimeout): MiddlewareHandler => {
    const setting = engine.route(value, 'timeouts.route()');
    markers++;
    const handle: MiddlewareHandler & TimeoutMarked = (c, next) => {
      const context = requestTimeoutOf(c) as RequestTimeoutContext | undefined;
      if (context?.engine !== engine) {
        throw new Error(
          'floodgate: timeouts.route() is on this route but the requestTimeouts middleware it belongs to did not ' +
            'run for the request; install it with app.use() before the routes',
        );
      }
      context.apply(setting);
      return next();
    };
    handle[kTimeoutMarker] = { engine, setting };
    return handle;
  };

  return Object.assign(middleware, { route, engine });
}

// Outside node, the runtime's request signal is the only word of a disconnect.
function linkClientSignal(c: Context, context: RequestTimeoutContext): void {
  const signal = c.req.raw.signal as AbortSignal | undefined;
  if (signal === undefined) return;
  const onAbort = (): void => context.responseClosed(false);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
}
