import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestTimeoutContext } from '../../http/timeouts/context.ts';
import { RequestTimeouts, type TimeoutAdapter } from '../../http/timeouts/engine.ts';
import { answerResponse, watchResponse } from '../../http/timeouts/node-response.ts';
import type { RequestTimeoutsOptions } from '../../http/timeouts/options.ts';
import { attachRequestTimeout, requestTimeoutOf } from '../../http/timeouts/registry.ts';
import type { RouteTimeout } from '../../http/timeouts/route.ts';
import { callHandler, errorHandler, handlerRejected, type NodeErrorHandler } from './errors.ts';

export type { RequestTimeout } from '../../http/timeouts/context.ts';
export type { RouteTimeout, TimeoutPolicyOptions } from '../../http/timeouts/index.ts';
export { isTimeoutReason, requestTimeoutOf } from '../../http/timeouts/index.ts';
export type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from '../../http/timeouts/options.ts';
export type { NodeErrorHandler } from './errors.ts';

/** Options of the node:http `requestTimeouts()`: the common ones, and where a handler's error goes. */
export interface NodeTimeoutsOptions extends RequestTimeoutsOptions {
  /**
   * Called with a wrapped handler's error (a throw or a rejection), the request and the response; the response
   * is then ended, 500 if nothing was sent. Default: `console.error(error)`. The error is never rethrown, so it
   * cannot become an unhandled rejection that ends the process. A handler rejecting with its own abort after the
   * deadline is not an error: the timeout's answer stands.
   */
  onError?: NodeErrorHandler;
}

/** A node:http request handler. It may return a promise; then "done" is when it settles. */
export type NodeHandler<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
> = (req: Req, res: Res) => unknown;

/** Wraps node:http handlers with request timeouts. Created by {@link requestTimeouts}. */
export interface NodeTimeouts {
  /**
   * Returns `handler` with timeouts applied. `route` overrides the default policy for this handler: a duration,
   * a policy name (checked now), a policy object, or `false`. Wrapping a handler that an outer wrapper of the
   * same `requestTimeouts` already times applies `route` to the running timeout instead of starting another,
   * so a small router can wrap its routes.
   */
  <Req extends IncomingMessage, Res extends ServerResponse>(
    handler: NodeHandler<Req, Res>,
    route?: RouteTimeout,
  ): (req: Req, res: Res) => void;
  /** The engine behind this wrapper. */
  readonly engine: RequestTimeouts;
}

const adapter: TimeoutAdapter = {
  expire: (context) => answerResponse(context.target as ServerResponse, context.current!),
  describe: (context) => {
    const req = (context.target as ServerResponse).req;
    return { route: req?.url?.split('?', 1)[0], method: req?.method };
  },
};

/**
 * Request timeouts for node:http.
 *
 * @example
 * ```ts
 * const withTimeouts = requestTimeouts({ default: '5s', policies: { reports: '30s' } });
 * http.createServer(withTimeouts(async (req, res) => {
 *   const { signal } = requestTimeoutOf(req)!;
 *   res.end(await render(req, { signal }));
 * }));
 * ```
 */
export function requestTimeouts(options?: NodeTimeoutsOptions): NodeTimeouts {
  const { onError: hook, ...rest } = options ?? {};
  const engine = new RequestTimeouts(options === undefined ? undefined : rest);
  const onError = errorHandler('requestTimeouts', hook);
  const wrap = <Req extends IncomingMessage, Res extends ServerResponse>(
    handler: NodeHandler<Req, Res>,
    route?: RouteTimeout,
  ): ((req: Req, res: Res) => void) => {
    if (typeof handler !== 'function') {
      throw new TypeError(`requestTimeouts(): the handler must be a function; got ${typeof handler}`);
    }
    const setting = route === undefined ? undefined : engine.route(route, 'route');
    return (req, res) => {
      const outer = requestTimeoutOf(req) as RequestTimeoutContext | undefined;
      let context = outer?.engine === engine ? outer : undefined;
      const started = context === undefined;
      if (context === undefined) {
        context = engine.start(adapter, res);
        attachRequestTimeout(req, context);
        watchResponse(res, context);
      }
      if (setting !== undefined) context.apply(setting);
      const result = callHandler(handler, req, res, onError);
      if (isThenable(result)) {
        const ctx = context;
        if (started) ctx.doneByPromise = true;
        result.then(
          () => {
            if (started) ctx.handlerDone();
          },
          (error: unknown) => {
            if (started) ctx.handlerDone();
            handlerRejected(onError, error, req, res);
          },
        );
      }
    };
  };
  return Object.assign(wrap, { engine }) as NodeTimeouts;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
