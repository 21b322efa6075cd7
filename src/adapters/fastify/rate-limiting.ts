import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyRegisterOptions,
  FastifyReply,
  FastifyRequest,
  FastifyTypeProvider,
  RawServerBase,
} from 'fastify';
import { RateLimiting } from '../../http/rate-limiting/engine.ts';
import { decideThen, Flow } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import { replyAnswers } from './answers.ts';
import { kLimits, kMetrics, type LimitedConfig, limitsIn, limitsOf, routeConfig } from './route-config.ts';
import { checkSiblingAtReady } from './sibling-check.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
  RouteCost,
  RouteLimit,
} from '../../http/rate-limiting/options.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** This request's rate limit (the same numbers as its RateLimit fields); undefined when not limited. */
    rateLimit?: RateLimitInfo;
  }
  interface FastifyContextConfig {
    /**
     * This route's rate limiting: a policy name (checked when the route is added), an inline policy, or
     * `false` for none. Omitted: the global limiter only. (`rateLimit` is @fastify/rate-limit's key; floodgate
     * still reads it when that plugin is not registered, untyped.)
     */
    rateLimiting?: RouteLimit<FastifyRequest, FastifyReply>;
  }
  interface FastifyRegister<
    T,
    RawServer extends RawServerBase,
    TypeProviderDefault extends FastifyTypeProvider,
    LoggerDefault extends FastifyBaseLogger,
  > {
    /**
     * floodgate's plugin with its options typed up front. Fastify's own overloads infer the options type from the
     * plugin and the options object together, and TypeScript then types a key function inside a generic call
     * (`partitioned({ key: (request) => … })`) before the plugin's side is known: `request` would be `unknown`.
     */
    // biome-ignore lint/style/useShorthandFunctionType: an overload merged into Fastify's interface
    (plugin: typeof rateLimiting, opts?: FastifyRegisterOptions<FastifyRateLimitingOptions>): T;
  }
}

/** Options of the Fastify plugin: `onRejected` sees the Fastify `request` and `reply`. */
export type FastifyRateLimitingOptions = RateLimitingOptions<FastifyRequest, FastifyReply>;

const TIMEOUTS_PLUGIN = 'floodgate-request-timeouts';

// Options Fastify itself reads from register(); they are not ours to validate.
const FASTIFY_KEYS = new Set(['prefix', 'logLevel', 'logSerializers']);

/**
 * Rate limiting for Fastify 5, as a plugin whose hook applies to the whole application. Each request is decided
 * once, in `onRequest` (before the body is read), against the global limiter chained with its route's
 * `config.rateLimit` policy. Register it before the routes: routes added earlier are validated at their first
 * request instead of at startup.
 *
 * @example
 * ```ts
 * await app.register(rateLimiting, {
 *   global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
 *   policies: { search: concurrency({ permitLimit: 4, queueLimit: 16 }) },
 * });
 * app.get('/search', { config: { rateLimiting: 'search' } }, search);
 * app.get('/health', { config: { rateLimiting: false } }, health);
 * ```
 */
export function rateLimiting(
  fastify: FastifyInstance,
  options: FastifyRateLimitingOptions,
  done: (error?: Error) => void,
): void {
  let engine: RateLimiting;
  try {
    const own = Object.fromEntries(Object.entries(options ?? {}).filter(([key]) => !FASTIFY_KEYS.has(key)));
    engine = new RateLimiting(own as RateLimitingOptions);
  } catch (error) {
    done(error as Error);
    return;
  }

  const flow = new Flow(engine, replyAnswers);

  // `config.timeout` is floodgate's too: without the timeouts plugin nothing would apply it.
  const noteTimeoutOption = checkSiblingAtReady(fastify, 'timeout', {
    name: TIMEOUTS_PLUGIN,
    factory: 'requestTimeouts',
    without: 'the route has no timeout',
  });

  // Declared up front, so every request object has the property from the start (Fastify's advice: adding it per
  // request would change the request objects' shape).
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);

  fastify.addHook('onRoute', function onRoute(this: FastifyInstance, route) {
    const config = (route.config ?? {}) as LimitedConfig;
    const where = `route ${String(route.method)} ${route.url}`;
    if (config.timeout !== undefined) noteTimeoutOption(this, where);
    const limits = limitsIn(engine, config, this, where);
    // The route's template is known here, once: its metrics carry it as `http.route` with nothing per request.
    route.config = {
      ...config,
      [kLimits]: limits,
      [kMetrics]: limits.metricsFor(route.url),
    } as typeof route.config;
  });

  fastify.addHook('onRequest', (request, reply, next) => {
    const config = routeConfig(request);
    let limits: RouteLimits;
    try {
      limits =
        config === undefined
          ? engine.defaultRoute
          : limitsOf(engine, fastify, config, request.method, request.routeOptions.url);
    } catch (error) {
      next(error as Error);
      return;
    }
    if (limits.unlimited) {
      next();
      return;
    }
    decideThen(flow, limits, request, reply, reply, next as (error?: unknown) => void, config?.[kMetrics]);
  });

  done();
}

// Hooks of this plugin apply to the whole application, as with fastify-plugin.
Object.assign(rateLimiting, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'floodgate-rate-limiting',
  [Symbol.for('plugin-meta')]: { name: 'floodgate-rate-limiting', fastify: '5.x' },
});
