import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestTimeoutContext } from '../../http/timeouts/context.ts';
import { RequestTimeouts, type TimeoutAdapter } from '../../http/timeouts/engine.ts';
import { answerResponse, watchResponse } from '../../http/timeouts/node-response.ts';
import type { RequestTimeoutsOptions } from '../../http/timeouts/options.ts';
import { isAbortReason } from '../../http/timeouts/reasons.ts';
import { attachRequestTimeout, requestTimeoutOf } from '../../http/timeouts/registry.ts';
import type { RouteTimeout } from '../../http/timeouts/route.ts';

export type { RequestTimeout } from '../../http/timeouts/context.ts';
export type { RouteTimeout, TimeoutPolicyOptions } from '../../http/timeouts/index.ts';
export { isTimeoutReason, requestTimeoutOf } from '../../http/timeouts/index.ts';
export type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from '../../http/timeouts/options.ts';

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
export function requestTimeouts(options?: RequestTimeoutsOptions): NodeTimeouts {
  const engine = new RequestTimeouts(options);
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
      const result = handler(req, res);
      if (started && isThenable(result)) {
        context.doneByPromise = true;
        const ctx = context;
        result.then(
          () => ctx.handlerDone(),
          (error: unknown) => {
            ctx.handlerDone();
            // A handler that rethrows its own abort after we answered did nothing wrong; anything else stays
            // an unhandled rejection, as it would be without floodgate.
            if (!(ctx.timedOut && isAbortReason(error))) throw error;
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
