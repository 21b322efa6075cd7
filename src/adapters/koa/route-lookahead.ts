import type { RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';

/**
 * Which route marker, if any, the request will reach. The app-level middleware runs before `@koa/router` routes
 * the request, yet must decide the global limiter and the route's policy as one chain: it asks each router
 * mounted on the app (`app.use(router.routes())`, whose dispatch function carries its router) which layers the
 * request matches, with the router's own `match()`, and looks for a marker in those layers' stacks, in the
 * order the router would run them. Nested routers (`router.use(sub.routes())`) are flattened into their parent
 * by `@koa/router` itself, so the top-level router sees their routes too.
 */

export const kMarker: unique symbol = Symbol.for('floodgate.rateLimitMarker') as never;

/** A marker middleware carries its engine and route limits. */
export type Marked = { [kMarker]?: { engine: RateLimiting; route: RouteLimits } };

/** What `@koa/router` offers: `match()` and its layers' middleware stacks. */
interface Router {
  opts?: { routerPath?: string };
  match(path: string, method: string): { pathAndMethod: RouterLayer[]; route: boolean };
}

/** A layer of `@koa/router`: its middleware stack and its path (the template, with the router's prefix). */
export interface RouterLayer {
  stack?: unknown[];
  path?: unknown;
}

interface ContextLike {
  readonly app?: { middleware?: unknown[] };
  readonly path?: string;
  readonly method?: string;
}

/**
 * The router's layer holding the marker on the route `ctx` will reach (read its limits with {@link markerIn}), or
 * undefined for none (the global limiter).
 */
export function findMarker(ctx: ContextLike, engine: RateLimiting): RouterLayer | undefined {
  const layers = matchedLayers(ctx);
  if (layers === undefined) return undefined;
  for (const layer of layers) {
    if (markerIn(layer, engine) !== undefined) return layer;
  }
  return undefined;
}

/**
 * The layers of the route `ctx` will reach, in the order the router runs them: those of the first router mounted
 * on the app that has a matching route (the one that answers, unless its handler calls next()); undefined for
 * none. Rate-limiting and timeout markers are both found through it.
 */
export function matchedLayers(ctx: ContextLike): readonly RouterLayer[] | undefined {
  const stack = ctx.app?.middleware;
  if (!Array.isArray(stack)) return undefined;
  for (const fn of stack) {
    const router = (fn as { router?: Router } | null)?.router;
    if (router === undefined || typeof router.match !== 'function') continue;
    const path = router.opts?.routerPath ?? ctx.path;
    if (typeof path !== 'string') continue;
    let matched: ReturnType<Router['match']>;
    try {
      matched = router.match(path, ctx.method ?? 'GET');
    } catch {
      continue; // The router fails the request too: the global limiter decides.
    }
    // A router that matches no route runs none of its layers: the next router (or nothing) handles the request.
    if (!matched.route) continue;
    // The first router with a matching route is the one that answers (unless its handler calls next()).
    return matched.pathAndMethod;
  }
  return undefined;
}

/** The limits of `engine`'s first marker in a router layer's stack, or undefined. */
export function markerIn(layer: RouterLayer, engine: RateLimiting): RouteLimits | undefined {
  if (!Array.isArray(layer.stack)) return undefined;
  for (const handle of layer.stack) {
    const marker = (handle as Marked | null)?.[kMarker];
    if (marker !== undefined && marker.engine === engine) return marker.route;
  }
  return undefined;
}
