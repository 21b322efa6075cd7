import type { Context } from 'hono';
import type { RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import type { RouteMetrics } from '../../http/rate-limiting/route-metrics.ts';
import { throughComposed } from './composed.ts';

/** Route markers on Hono: which of one engine's markers a request's matched handlers carry, and its template. */

const kMarker: unique symbol = Symbol.for('floodgate.rateLimitMarker') as never;
export type Matched = Context['req']['matchedRoutes'][number];
export const NO_ROUTES: readonly Matched[] = [];
type Marked = { [kMarker]?: { engine: RateLimiting; route: RouteLimits } };

/** Makes `handler` a marker of `engine` deciding `route`. */
export function markHandler(handler: object, engine: RateLimiting, route: RouteLimits): void {
  (handler as Marked)[kMarker] = { engine, route };
}

// The marker a matched handler carries, looking through Hono's wrappers of sub-apps with their own onError.
function markerOf(handler: unknown): Marked[typeof kMarker] {
  return throughComposed(handler, readMarker);
}

function readMarker(handler: object): Marked[typeof kMarker] {
  return (handler as Marked)[kMarker];
}

/**
 * The route limits of `engine`'s marker among the handlers Hono matched; `null` when two of its markers
 * disagree, which is found before anything is decided so that the failing request is never charged.
 */
export function markedRoute(
  engine: RateLimiting,
  routes: readonly Matched[],
): RouteLimits | null | undefined {
  let found: RouteLimits | undefined;
  for (const matched of routes) {
    const marker = markerOf(matched.handler);
    if (marker === undefined || marker.engine !== engine) continue;
    if (found !== undefined && found !== marker.route) return null;
    found = marker.route;
  }
  return found;
}

export const conflict = (): Error =>
  new Error(
    'floodgate: two rate-limiting markers of one limiter apply to this route (the request would be already ' +
      'decided by the first); global and route policy must be decided together, so give the route one marker',
  );

/**
 * The route template for `http.route`: the path of `engine`'s marker deciding `route`, else of the last route
 * matched with a method (the handler's, not an `app.use()` pattern); none for a request no route matched.
 */
export function metricsOf(
  engine: RateLimiting,
  route: RouteLimits,
  routes: readonly Matched[],
): RouteMetrics {
  // No marker decides the global limiter alone.
  if (route !== engine.defaultRoute) {
    for (const matched of routes) {
      const marker = markerOf(matched.handler);
      if (marker?.engine === engine && marker.route === route) return route.metricsFor(matched.path);
    }
  }
  return route.metricsFor(templateIn(routes));
}

/** The path of the last matched handler that is not middleware (`app.use`, method `ALL`): the route's template. */
export function templateIn(routes: readonly Matched[]): string | undefined {
  let template: string | undefined;
  for (const matched of routes) if (matched.method !== 'ALL') template = matched.path;
  return template;
}
