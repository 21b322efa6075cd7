import type { ServerResponse } from 'node:http';
import type { Middleware, Next } from 'koa';
import type { RequestTimeout, RequestTimeoutContext } from '../../http/timeouts/context.ts';
import { RequestTimeouts, type TimeoutAdapter } from '../../http/timeouts/engine.ts';
import { answerResponse, watchResponse } from '../../http/timeouts/node-response.ts';
import type { RequestTimeoutsOptions } from '../../http/timeouts/options.ts';
import { isAbortReason } from '../../http/timeouts/reasons.ts';
import { attachRequestTimeout, requestTimeoutOf } from '../../http/timeouts/registry.ts';
import type { RouteTimeout, TimeoutRouteSetting } from '../../http/timeouts/route.ts';
import { matchedLayers } from './route-lookahead.ts';

export type { RequestTimeout } from '../../http/timeouts/context.ts';
export type { RouteTimeout, TimeoutPolicyOptions } from '../../http/timeouts/index.ts';
export { isTimeoutReason, requestTimeoutOf } from '../../http/timeouts/index.ts';
export type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from '../../http/timeouts/options.ts';

declare module 'koa' {
  interface DefaultState {
    /** The request's timeout (its `signal`, `deadline`, `disable()`), set by the timeouts middleware. */
    requestTimeout?: RequestTimeout;
  }
}

/** The app-level middleware, with a route-level helper. Created by {@link requestTimeouts}. */
export interface KoaTimeouts extends Middleware {
  /**
   * A route-level middleware (for `@koa/router`) that sets the route's timeout: a duration, a policy name
   * (checked now, so a typo fails at startup), a policy object, or `false` to disable. It needs the app-level
   * middleware before it; if that is missing, the first request through this route fails with an error naming
   * the fix.
   */
  route(setting: RouteTimeout): Middleware;
  /** The engine behind this middleware. */
  readonly engine: RequestTimeouts;
}

interface Ctx {
  req: object;
  res: ServerResponse;
  state: { requestTimeout?: RequestTimeout };
  respond?: boolean;
  method: string;
  path: string;
  _matchedRoute?: unknown;
  app: { emit(event: 'error', error: unknown, ctx: unknown): boolean };
}

/** What the adapter keeps per request. */
class KoaRequest {
  /** Settles the middleware; `undefined` once it has (route done, or answered at the deadline). */
  resolve: (() => void) | undefined;
  reject: ((error: unknown) => void) | undefined;
  context!: RequestTimeoutContext;

  constructor(readonly ctx: Ctx) {}

  /** The rest of the chain settled: unless the deadline answered first, its result stands. */
  settled(error: unknown, failed: boolean): void {
    this.context.handlerDone();
    const { resolve, reject } = this;
    if (resolve === undefined) {
      // Answered at the deadline already. A handler's abort is the expected end of its work; anything else
      // goes where Koa sends errors, without an answer (one was sent).
      if (failed && !isAbortReason(error)) this.ctx.app.emit('error', error, this.ctx);
      return;
    }
    this.resolve = this.reject = undefined;
    if (failed) reject!(error);
    else resolve();
  }
}

const adapter: TimeoutAdapter = {
  expire: (context) => {
    const state = context.target as KoaRequest;
    const result = answerResponse(state.ctx.res, context.current!);
    const resolve = state.resolve;
    if (resolve !== undefined) {
      // The chain keeps running; Koa must not write what it leaves in ctx.body: the answer is on the socket.
      state.resolve = state.reject = undefined;
      state.ctx.respond = false;
      resolve();
    }
    return result;
  },
  describe: (context) => {
    const { ctx } = context.target as KoaRequest;
    const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : ctx.path;
    return { route, method: ctx.method };
  },
};

/**
 * Request timeouts for Koa 2 and 3. Install the returned middleware with `app.use()` first (before rate
 * limiting and routers); set a route's timeout with `.route()` on a `@koa/router` route. The handler gets the
 * request's timeout as `ctx.state.requestTimeout` (its `signal` aborts at the deadline and on disconnect).
 *
 * At the deadline the policy's answer is written at once, even when the handler ignores its signal: the
 * middleware settles, Koa writes nothing more for the request, and what the handler writes later is dropped. A
 * response whose body had started (a stream) is cut by closing the connection.
 *
 * @example
 * ```ts
 * const timeouts = requestTimeouts({ default: '5s', policies: { reports: '30s' } });
 * app.use(timeouts);
 * router.get('/reports/:id', timeouts.route('reports'), async (ctx) => {
 *   ctx.body = await buildReport(ctx.params.id, { signal: ctx.state.requestTimeout!.signal });
 * });
 * ```
 */
export function requestTimeouts(options?: RequestTimeoutsOptions): KoaTimeouts {
  const engine = new RequestTimeouts(options);
  let markers = 0;

  // Not an async function: one promise per request, settled by the chain or by the deadline, whichever is first.
  const middleware = (ctx: Ctx, next: Next): Promise<void> => {
    if ((requestTimeoutOf(ctx.req) as RequestTimeoutContext | undefined)?.engine === engine) {
      return next() as Promise<void>;
    }
    const state = new KoaRequest(ctx);
    const context = engine.start(adapter, state);
    state.context = context;
    context.doneByPromise = true;
    // On the node request too: the rate limiter's queue waits with this signal (queue time counts).
    attachRequestTimeout(ctx.req, context);
    attachRequestTimeout(ctx, context);
    ctx.state.requestTimeout = context;
    watchResponse(ctx.res, context);
    // The route's own timeout applies from here, not from its marker: a rate limiter between the two may queue
    // the request, and queue plus handler must stay within the route's budget.
    if (markers > 0) {
      const setting = routeSetting(ctx, engine);
      if (setting !== undefined) context.apply(setting);
    }
    return new Promise<void>((resolve, reject) => {
      state.resolve = resolve;
      state.reject = reject;
      let chain: Promise<unknown>;
      try {
        chain = next();
      } catch (error) {
        chain = Promise.reject(error);
      }
      chain.then(
        () => state.settled(undefined, false),
        (error: unknown) => state.settled(error, true),
      );
    });
  };

  const route = (value: RouteTimeout): Middleware => {
    const setting = engine.route(value, 'timeouts.route()');
    markers++;
    const handle = (ctx: Ctx, next: Next): Promise<unknown> => {
      const context = requestTimeoutOf(ctx.req) as RequestTimeoutContext | undefined;
      if (context?.engine !== engine) {
        throw new Error(
          'floodgate: timeouts.route() is on this route but the requestTimeouts middleware it belongs to did not ' +
            'run for the request; install it with app.use() before the routes',
        );
      }
      context.apply(setting);
      return next();
    };
    (handle as TimeoutMarked)[kTimeoutMarker] = { engine, setting };
    return handle as unknown as Middleware;
  };

  return Object.assign(middleware, { route, engine }) as unknown as KoaTimeouts;
}

const kTimeoutMarker = Symbol('floodgate.koaTimeoutMarker');
type TimeoutMarked = { [kTimeoutMarker]?: { engine: RequestTimeouts; setting: TimeoutRouteSetting } };

/** The setting of `engine`'s timeout marker on the route `ctx` will reach, if it has one. */
function routeSetting(ctx: Ctx, engine: RequestTimeouts): TimeoutRouteSetting | undefined {
  const layers = matchedLayers(ctx as never);
  if (layers === undefined) return undefined;
  for (const layer of layers) {
    if (!Array.isArray(layer.stack)) continue;
    for (const handle of layer.stack) {
      const marker = (handle as TimeoutMarked | null)?.[kTimeoutMarker];
      if (marker !== undefined && marker.engine === engine) return marker.setting;
    }
  }
  return undefined;
}
