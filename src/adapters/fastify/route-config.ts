import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import type { RouteMetrics } from '../../http/rate-limiting/route-metrics.ts';
import { routeConfigOf } from './route-context.ts';

/** A Fastify route's rate-limiting setting: read from its `config`, validated once, kept on the config object. */

export const kLimits = Symbol('floodgate.rateLimits');
export const kMetrics = Symbol('floodgate.rateLimitMetrics');
export type LimitedConfig = {
  rateLimiting?: unknown;
  rateLimit?: unknown;
  timeout?: unknown;
  [kLimits]?: RouteLimits;
  /** The route's metric attributes under its template (`http.route`), found with its limits. */
  [kMetrics]?: RouteMetrics;
};

// @fastify/rate-limit reads `config.rateLimit` too; where it is registered, that key is its, not ours.
const OTHER_LIMITER = '@fastify/rate-limit';

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

/** The limits of a route's `config`, as `onRoute` sees it (`where` names the route in errors). */
export function limitsIn(
  engine: RateLimiting,
  config: LimitedConfig,
  instance: FastifyInstance,
  where: string,
): RouteLimits {
  const setting = settingOf(config, instance);
  return setting === undefined
    ? engine.defaultRoute
    : engine.route(setting.value, `${where}: config.${setting.key}`);
}

/** A route added before the plugin was not seen by onRoute: its setting is validated at its first request. */
export function limitsOf(
  engine: RateLimiting,
  instance: FastifyInstance,
  config: LimitedConfig,
  method: string,
  url: string | undefined,
): RouteLimits {
  let limits = config[kLimits];
  if (limits === undefined) {
    limits = limitsIn(engine, config, instance, `route ${method} ${url}`);
    config[kLimits] = limits;
    config[kMetrics] = limits.metricsFor(url);
  }
  return limits;
}

/** The route's config, where its `rateLimiting` setting is. */
export function routeConfig(request: FastifyRequest): LimitedConfig | undefined {
  return routeConfigOf(request) as LimitedConfig | undefined;
}
