import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { RequestTimeout, RequestTimeoutContext } from '../../http/timeouts/context.ts';
import { RequestTimeouts, type TimeoutAdapter } from '../../http/timeouts/engine.ts';
import { dropLateWrites, watchResponse } from '../../http/timeouts/node-response.ts';
import type { RequestTimeoutsOptions } from '../../http/timeouts/options.ts';
import { isAbortReason } from '../../http/timeouts/reasons.ts';
import { attachRequestTimeout } from '../../http/timeouts/registry.ts';
import type { RouteTimeout, TimeoutRouteSetting } from '../../http/timeouts/route.ts';
import { emitFloodgateWarning } from '../../warning.ts';
import { routeConfigOf } from './route-context.ts';
import { checkSiblingAtReady } from './sibling-check.ts';

export type { RequestTimeout } from '../../http/timeouts/context.ts';
export type { RouteTimeout, TimeoutPolicyOptions } from '../../http/timeouts/index.ts';
export { isTimeoutReason, requestTimeoutOf } from '../../http/timeouts/index.ts';
export type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from '../../http/timeouts/options.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's timeout (its `signal`, `deadline`, `disable()`), or `null` outside the timeouts plugin. */
    requestTimeout: RequestTimeout | null;
  }
  interface FastifyContextConfig {
    /** This route's timeout: a duration, a policy name, a policy object, or `false` to disable. */
    timeout?: RouteTimeout;
  }
}

const kSetting = Symbol('floodgate.timeoutSetting');
const RATE_LIMITING_PLUGIN = 'floodgate-rate-limiting';
type TimedConfig = { timeout?: unknown; [kSetting]?: TimeoutRouteSetting };

// Options Fastify itself reads from register(); they are not ours to validate.
const FASTIFY_KEYS = new Set(['prefix', 'logLevel', 'logSerializers']);

// Headers that describe the handler's body; the policy's answer has its own.
const REPRESENTATION = [
  'content-type',
  'content-length',
  'content-encoding',
  'content-range',
  'etag',
  'last-modified',
];

const adapter: TimeoutAdapter = {
  expire: (context) => {
    const reply = context.target as FastifyReply;
    dropLateSends(reply);
    if (reply.sent || reply.raw.writableEnded || reply.raw.destroyed) return 'handler';
    const policy = context.current!;
    if (reply.raw.headersSent) {
      dropLateWrites(reply.raw);
      reply.raw.destroy();
      return 'cut';
    }
    // Answer through Fastify rather than on the raw response, so onSend/onResponse hooks and the request log
    // see the 504 like any other reply.
    for (const name of REPRESENTATION) reply.removeHeader(name);
    for (const [name, value] of policy.headers) reply.header(name, value);
    reply.code(policy.status);
    originalSend(reply, policy.body.length > 0 ? policy.body : undefined);
    if (reply.raw.writableEnded) dropLateWrites(reply.raw);
    else reply.raw.once('finish', () => dropLateWrites(reply.raw));
    return 'answered';
  },
  describe: (context) => {
    const request = (context.target as FastifyReply).request;
    return { route: request.routeOptions.url, method: request.method };
  },
  template: (context) => (context.target as FastifyReply).request.routeOptions.url,
};

function originalSend(reply: FastifyReply, payload: unknown): void {
  Object.getPrototypeOf(reply).send.call(reply, payload);
}

// A late `reply.send()` would log "Reply was already sent"; after the deadline it is simply dropped. For a
// callback-style handler (no promise to watch), that late send is also how it says it is done.
function dropLateSends(reply: FastifyReply): void {
  (reply as unknown as { send: unknown }).send = function droppedSend(this: FastifyReply) {
    const context = this.request.requestTimeout as RequestTimeoutContext | null;
    if (context !== null && !context.doneByPromise) context.handlerDone();
    return this;
  };
}

function routeConfig(request: FastifyRequest): TimedConfig {
  return routeConfigOf(request) as TimedConfig;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

// Wraps a route handler so that "done" is its promise, and so that a handler rethrowing its own abort after
// the deadline is not logged as "Promise errored, but reply.sent = true was set".
function observeHandler(handler: RouteOptions['handler']): RouteOptions['handler'] {
  return function timedHandler(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
    const result = handler.call(this, request, reply);
    const context = request.requestTimeout as RequestTimeoutContext | null;
    if (context === null || !isThenable(result)) return result;
    context.doneByPromise = true;
    return Promise.resolve(result).then(
      (value) => {
        context.handlerDone();
        return value;
      },
      (error: unknown) => {
        context.handlerDone();
        if (context.timedOut && isAbortReason(error)) {
          // The policy answers (now, if this came within its grace).
          context.gaveUp();
          return undefined;
        }
        throw error;
      },
    );
  } as RouteOptions['handler'];
}

/**
 * Request timeouts for Fastify 5, as a plugin whose hooks apply to the whole application. Register it before
 * the routes (and before rate limiting); set a route's timeout with `config: { timeout }`, checked when the
 * route is added.
 *
 * @example
 * ```ts
 * await app.register(requestTimeouts, { default: '5s', policies: { reports: '30s' } });
 * app.get('/reports/:id', { config: { timeout: 'reports' } }, async (request) => {
 *   return buildReport(request.params.id, { signal: request.requestTimeout!.signal });
 * });
 * ```
 */
export function requestTimeouts(
  fastify: FastifyInstance,
  options: RequestTimeoutsOptions,
  done: (error?: Error) => void,
): void {
  let engine: RequestTimeouts;
  try {
    const own = Object.fromEntries(Object.entries(options ?? {}).filter(([key]) => !FASTIFY_KEYS.has(key)));
    engine = new RequestTimeouts(own);
  } catch (error) {
    done(error as Error);
    return;
  }

  fastify.decorateRequest('requestTimeout', null);

  // Fastify runs onRequest hooks in registration order: a rate limiter registered first queues requests before
  // they have a timeout, so queue time would not count against the deadline. It still works; say so once.
  if (fastify.hasPlugin(RATE_LIMITING_PLUGIN)) {
    emitFloodgateWarning(
      'FLOODGATE_PLUGIN_ORDER',
      'floodgate: requestTimeouts is registered after rateLimiting, so time spent in a rate limiter queue does not ' +
        'count against the deadline; register requestTimeouts first',
    );
  }

  // `config.rateLimiting` is floodgate's too: without the rate-limiting plugin nothing would apply it.
  const noteRateLimitingOption = checkSiblingAtReady(fastify, 'rateLimiting', {
    name: RATE_LIMITING_PLUGIN,
    factory: 'rateLimiting',
    without: 'the route is not limited',
  });

  fastify.addHook('onRoute', function onRoute(this: FastifyInstance, route) {
    const config = (route.config ?? {}) as TimedConfig;
    if ((config as { rateLimiting?: unknown }).rateLimiting !== undefined) {
      noteRateLimitingOption(this, `route ${String(route.method)} ${route.url}`);
    }
    if (config.timeout !== undefined) {
      const where = `route ${String(route.method)} ${route.url}: config.timeout`;
      route.config = { ...config, [kSetting]: engine.route(config.timeout, where) } as typeof route.config;
    }
    route.handler = observeHandler(route.handler);
  });

  fastify.addHook('onRequest', (request, reply, next) => {
    const context = engine.start(adapter, reply);
    request.requestTimeout = context;
    attachRequestTimeout(request.raw, context);
    watchResponse(reply.raw, context);
    const config = routeConfig(request);
    let setting = config[kSetting];
    // A route added before this plugin was not seen by onRoute: validate its setting now, once.
    if (setting === undefined && config.timeout !== undefined) {
      setting = engine.route(
        config.timeout,
        `route ${request.method} ${request.routeOptions.url}: config.timeout`,
      );
      config[kSetting] = setting;
    }
    if (setting !== undefined) context.apply(setting);
    next();
  });

  done();
}

// Hooks and decorators of this plugin apply to the whole application, as with fastify-plugin.
Object.assign(requestTimeouts, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'floodgate-request-timeouts',
  [Symbol.for('plugin-meta')]: { name: 'floodgate-request-timeouts', fastify: '5.x' },
});
