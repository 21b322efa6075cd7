import { type Attributes, telemetry } from '../../telemetry.ts';
import { RequestTimeoutContext, type TimeoutAdapter, type TimeoutEngine } from './context.ts';
import { type DeadlineEntry, DeadlineList } from './deadlines.ts';
import {
  type RequestTimeoutsOptions,
  type ResolvedOptions,
  resolveOptions,
  type TimeoutInfo,
} from './options.ts';
import type { TimeoutPolicy } from './policy.ts';
import { parseRouteSetting, type TimeoutRouteSetting } from './route.ts';

export type { TimeoutAdapter } from './context.ts';

/**
 * The framework-neutral timeouts engine: validated policies, the deadline lists, the answer at the deadline,
 * metrics and hooks. Adapters create one per `requestTimeouts(options)` call.
 */
export class RequestTimeouts implements TimeoutEngine {
  readonly options: ResolvedOptions;
  readonly defaultPolicy: TimeoutPolicy | undefined;
  /** Deadlines, one list per duration. */
  readonly #lists = new Map<number, DeadlineList>();
  /** Ends of graces, one list per grace. */
  readonly #graces = new Map<number, DeadlineList>();
  readonly #onExpired = (expired: DeadlineEntry[]): void => this.#expire(expired as RequestTimeoutContext[]);
  readonly #onGraceOver = (over: DeadlineEntry[]): void => {
    for (const context of over) this.#answer(context as RequestTimeoutContext);
  };

  /** Throws a `TypeError` or `RangeError` naming the option when `options` are invalid. */
  constructor(options?: RequestTimeoutsOptions) {
    this.options = resolveOptions(options);
    this.defaultPolicy = this.options.defaultPolicy;
  }

  /** Validates a route setting now (at startup), so that an unknown policy name fails where it is written. */
  route(value: unknown, where?: string): TimeoutRouteSetting {
    return parseRouteSetting(this.options, value, where);
  }

  /** Starts timing a request; the default policy, if any, applies until a route setting says otherwise. */
  start(adapter: TimeoutAdapter, target: unknown): RequestTimeoutContext {
    const context = new RequestTimeoutContext(this, adapter, target, performance.now());
    if (context.current !== undefined) {
      context.deadline = context.due = context.start + context.current.ms;
      this.schedule(context);
    }
    return context;
  }

  schedule(context: RequestTimeoutContext): void {
    const ms = context.current!.ms;
    let list = this.#lists.get(ms);
    if (list === undefined) {
      list = new DeadlineList(this.#onExpired);
      this.#lists.set(ms, list);
    }
    list.add(context);
  }

  endGrace(context: RequestTimeoutContext): void {
    this.unschedule(context);
    this.#answer(context);
  }

  unschedule(context: RequestTimeoutContext): void {
    context.list?.remove(context);
  }

  #expire(expired: RequestTimeoutContext[]): void {
    for (const context of expired) {
      // 'abort' listeners run synchronously inside expire(); one that answers keeps its answer. Anything
      // asynchronous (a catch after an awaited fetch) can answer only within the policy's grace: without one,
      // waiting for it would let an error handler answer 500 in place of the policy, and make the deadline vague.
      context.expire();
      const grace = context.current!.graceMs;
      if (grace > 0 && context.expired) {
        context.due = context.deadline + grace;
        let list = this.#graces.get(grace);
        if (list === undefined) {
          list = new DeadlineList(this.#onGraceOver);
          this.#graces.set(grace, list);
        }
        list.add(context);
      } else this.#answer(context);
    }
  }

  #answer(context: RequestTimeoutContext): void {
    if (!context.expired) return;
    const policy = context.current!;
    const result = context.adapter.expire(context);
    const overran = result !== 'handler' && !context.done;
    if (result === 'handler') context.markFinished();
    else context.markTimedOut(overran);
    const metrics = telemetry();
    const template = context.adapter.template?.(context);
    metrics.requestTimeouts.add(1, attributes(policy.name, template, result));
    if (overran) {
      // Kept for the overrun's duration, recorded when the handler finishes.
      context.attributes = attributes(policy.name, template, undefined);
      metrics.handlerOverruns.add(1, context.attributes);
    }
    const onTimeout = this.options.onTimeout;
    if (onTimeout) {
      const { route, method } = context.adapter.describe(context);
      const info: TimeoutInfo = { policy: policy.name, route, method, result, overrun: overran };
      callHook(onTimeout, info);
    }
  }

  /** A handler that ran past its deadline finished (called by the context). */
  reportOverrun(context: RequestTimeoutContext): void {
    const policy = context.current!.name;
    const overrunMs = Math.max(0, context.doneAt - context.deadline);
    const base = context.attributes ?? attributes(policy, context.adapter.template?.(context), undefined);
    telemetry().overrunDuration.record(overrunMs / 1000, base);
    const onOverrun = this.options.onOverrun;
    if (onOverrun) {
      const { route, method } = context.adapter.describe(context);
      callHook(onOverrun, { policy, route, method, overrunMs });
    }
  }
}

// `policy`, `http.route` when the adapter knows the route's template, and `result` when given.
function attributes(policy: string, template: string | undefined, result: string | undefined): Attributes {
  const base: Attributes = template === undefined ? { policy } : { policy, 'http.route': template };
  if (result !== undefined) base.result = result;
  return base;
}

// A throwing hook must not take the answer (or the process) down with it; it becomes a process warning.
function callHook<T>(hook: (info: T) => void, info: T): void {
  try {
    hook(info);
  } catch (error) {
    process.emitWarning(error instanceof Error ? error : String(error), { code: 'FLOODGATE_HOOK_FAILED' });
  }
}

/**
 * Creates the framework-neutral timeouts engine. Most applications use their adapter's `requestTimeouts`
 * instead (`floodgate/node`, `floodgate/express`, `floodgate/fastify`, `floodgate/hono`), which builds one.
 */
export function requestTimeouts(options?: RequestTimeoutsOptions): RequestTimeouts;
export function requestTimeouts(options?: RequestTimeoutsOptions, ...more: unknown[]): RequestTimeouts {
  // `app.use(requestTimeouts)` with this one instead of the adapter's: called as middleware, with a request (or a
  // Koa context) for options. Say what to import, on the framework's error path when it gave a `next`.
  if (more.length > 0 && isRequestLike(options)) {
    const error = new TypeError(
      "requestTimeouts from 'floodgate/http' is the framework-neutral engine, not a middleware, and it was " +
        "called with a request. Import requestTimeouts from 'floodgate/express' (or floodgate/node, " +
        "floodgate/fastify, floodgate/hono, floodgate/koa) and app.use(requestTimeouts({ default: '10s' })).",
    );
    // Express and connect take an error through next(error); Koa's next takes none, and a throw is its path.
    const next = more[more.length - 1];
    if (typeof next !== 'function' || more.length < 2) throw error;
    next(error);
    return undefined as never;
  }
  return new RequestTimeouts(options);
}

/** A node request (`method` and `headers`) or a Koa context (`req` and `res`): not an options object. */
function isRequestLike(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return (
    (typeof v.method === 'string' && typeof v.headers === 'object') ||
    (typeof v.req === 'object' && typeof v.res === 'object')
  );
}
