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
import { type Answers, decideThen, Flow } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { waitSignal } from '../../http/rate-limiting/node-http.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { Answer } from '../../http/rate-limiting/response.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import type { RouteMetrics } from '../../http/rate-limiting/route-metrics.ts';
import { checkSiblingAtReady } from './sibling-check.ts';

export type {
  HttpLimiter,
  OnRejected,
  RateLimitingOptions,
  RateLimitPolicyOptions,
  RejectedContext,
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

const kLimits = Symbol('floodgate.rateLimits');
const kMetrics = Symbol('floodgate.rateLimitMetrics');
type LimitedConfig = {
  rateLimiting?: unknown;
  rateLimit?: unknown;
  timeout?: unknown;
  [kLimits]?: RouteLimits;
  /** The route's metric attributes under its template (`http.route`), found with its limits. */
  [kMetrics]?: RouteMetrics;
};

// @fastify/rate-limit reads `config.rateLimit` too; where it is registered, that key is its, not ours.
const OTHER_LIMITER = '@fastify/rate-limit';
const TIMEOUTS_PLUGIN = 'floodgate-request-timeouts';

/** The route's floodgate setting and the option path it was read from, or undefined for none. */
function settingOf(
  config: LimitedConfig,
  instance: FastifyInstance,
): { value: unknown; key: 'rateLimiting' | 'rateLimit' } | undefined {
  if (config.rateLimiting !== undefined) return { value: config.rateLimiting, key: 'rateLimiting' };
  if (config.rateLimit !== undefined && !instance.hasPlugin(OTHER_LIMITER)) {
    return { value: config.rateLimit, key: 'rateLimit' };
  }
  return undefined;
}

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

  // A route added before this plugin was not seen by onRoute: its setting is validated at its first request.
  const limitsOf = (config: LimitedConfig, method: string, url: string | undefined): RouteLimits => {
    let limits = config[kLimits];
    if (limits === undefined) {
      const setting = settingOf(config, fastify);
      limits =
        setting === undefined
          ? engine.defaultRoute
          : engine.route(setting.value, `route ${method} ${url}: config.${setting.key}`);
      config[kLimits] = limits;
      config[kMetrics] = limits.metricsFor(url);
    }
    return limits;
  };

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
    const setting = settingOf(config, this);
    const limits =
      setting === undefined
        ? engine.defaultRoute
        : engine.route(setting.value, `${where}: config.${setting.key}`);
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
          : limitsOf(config, request.method, request.routeOptions.url);
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

// `request.routeOptions` builds a fresh object on every read; the route's config object itself sits under
// Fastify's context symbol (as in the timeouts plugin). Found once by its description, with the getter as fallback.
let kRouteContext: symbol | null | undefined;

function routeConfig(request: FastifyRequest): LimitedConfig | undefined {
  if (kRouteContext === undefined) {
    kRouteContext =
      Object.getOwnPropertySymbols(request).find((s) => s.description === 'fastify.context') ?? null;
  }
  const context =
    kRouteContext === null
      ? undefined
      : (request as unknown as Record<symbol, { config?: unknown }>)[kRouteContext];
  return (context?.config ?? request.routeOptions.config) as LimitedConfig | undefined;
}

const replyAnswers: Answers<FastifyReply> = {
  signal: (reply) => waitSignal(reply.raw.req, reply.raw),
  node: (reply) => reply.raw,
  timeout: (reply) => reply.raw.req,
  info: (reply, info) => {
    reply.request.rateLimit = info;
  },
  header: (reply, name, value) => {
    reply.header(name, value);
  },
  sent: (reply) => reply.sent,
  answeredBy: (reply) => reply.sent || reply.raw.destroyed,
  send,
};

// Answer through Fastify rather than on the raw response, so onSend/onResponse hooks and the request log see it.
function send(reply: FastifyReply, answer: Answer): void {
  for (const [name, value] of answer.headers) reply.header(name, value);
  if (answer.headers instanceof Headers && answer.headers.has('set-cookie')) {
    reply.header('set-cookie', answer.headers.getSetCookie());
  }
  // A Buffer, so that Fastify keeps the Content-Type as set (it adds a charset to strings).
  reply.code(answer.status).send(Buffer.from(answer.body));
}

// Hooks of this plugin apply to the whole application, as with fastify-plugin.
Object.assign(rateLimiting, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'floodgate-rate-limiting',
  [Symbol.for('plugin-meta')]: { name: 'floodgate-rate-limiting', fastify: '5.x' },
});
