import type { IncomingMessage } from 'node:http';
import type { RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import type { RouteMetrics } from '../../http/rate-limiting/route-metrics.ts';

/**
 * Which route marker, if any, the request will reach: the app-level middleware runs before Express routes the
 * request, yet must decide the global limiter and the route's policy as one chain (and the timeouts middleware
 * must apply the route's own timeout before a limiter queues the request). It walks the app's router
 * stack with the layers' own matchers (Express 4's `router/layer` and Express 5's `router` package alike),
 * stopping at the first route that matches the path and method, as Express does. Results are cached per
 * method and path, in a bounded map emptied when the stack grows.
 */

export const kMarker: unique symbol = Symbol.for('floodgate.rateLimitMarker') as never;

/** A marker middleware carries its engine and route limits. */
export type Marked = { [kMarker]?: { engine: RateLimiting; route: RouteLimits } };

interface Layer {
  handle: unknown;
  route?: {
    stack: Layer[];
    path?: unknown;
    _handlesMethod?(m: string): boolean;
    _handles_method?(m: string): boolean;
  };
  path?: string;
  match(path: string): boolean | { path: string };
}

interface App {
  _router?: { stack: Layer[] };
  router?: { stack: Layer[] };
  mountpath?: unknown;
  parent?: unknown;
}

const NONE = null;
const CACHE_SIZE = 1024;

interface Cache<T> {
  length: number;
  results: Map<string, T | null>;
}

const caches = new WeakMap<object, WeakMap<object, Cache<unknown>>>();

/** What {@link findMarker} returns when two markers of one engine with different limits are on the route. */
export const CONFLICTING: unique symbol = Symbol('floodgate.conflictingMarkers');

/**
 * The limits of the marker on the route `req` will reach; for a route without one, the global limiter's under
 * the route's template (so that its metrics carry `http.route` too); undefined when no route with a template
 * matches (the global limiter, unlabelled); or {@link CONFLICTING} when the route has two markers of this engine
 * that disagree (found before anything is decided, so that the request floodgate fails is not charged).
 */
export function findMarker(
  req: IncomingMessage,
  engine: RateLimiting,
): FoundMarker | typeof CONFLICTING | undefined {
  return lookAhead(req, engine, foundOf, agree, unmarkedOf);
}

/**
 * What decides the route ahead (a marker's limits, or the global limiter's on a route without one) and the
 * metric attributes under the route's template (`http.route`).
 */
export interface FoundMarker {
  readonly route: RouteLimits;
  readonly metrics: RouteMetrics;
}

// Made once per cached method and path, never per request.
function foundOf(
  handle: unknown,
  engine: RateLimiting,
  template: string | undefined,
): FoundMarker | undefined {
  const route = limitsOf(handle, engine);
  return route === undefined ? undefined : { route, metrics: route.metricsFor(template) };
}

// A route without a marker of this engine: the global limiter decides it, labelled with the route's template
// (bounded by the route setting's MAX_TEMPLATES, past which `metricsFor` gives the unlabelled attributes).
function unmarkedOf(engine: RateLimiting, template: string | undefined): FoundMarker | undefined {
  if (template === undefined) return undefined;
  const route = engine.defaultRoute;
  return { route, metrics: route.metricsFor(template) };
}

function agree(a: FoundMarker, b: FoundMarker): FoundMarker | typeof CONFLICTING {
  return a.route === b.route ? a : CONFLICTING;
}

/** Whether the stack of a matched route (`req.route`) has two markers of `engine` that disagree. */
export function conflictOnRoute(route: { stack?: Layer[] } | undefined, engine: RateLimiting): boolean {
  let found: RouteLimits | undefined;
  for (const layer of route?.stack ?? []) {
    const limits = limitsOf(layer.handle, engine);
    if (limits === undefined) continue;
    if (found !== undefined && found !== limits) return true;
    found = limits;
  }
  return false;
}

function limitsOf(handle: unknown, engine: RateLimiting): RouteLimits | undefined {
  const marker = (handle as Marked | undefined)?.[kMarker];
  return marker !== undefined && marker.engine === engine ? marker.route : undefined;
}

/**
 * What `pick` finds on the first handler of the route `req` will reach that it recognises, or undefined.
 * `owner` keys the cache: one `pick` per owner (an engine), so cached answers are its own.
 */
export function lookAhead<T, O extends object, C = never>(
  req: IncomingMessage,
  owner: O,
  /**
   * What a handler carries. `template` is its route's path as Express reports it in `req.baseUrl + req.route.path`
   * (the mount points as matched, then the route's own path), when the handler is in a route.
   */
  pick: (handle: unknown, owner: O, template: string | undefined) => T | undefined,
  /** Combines what two handlers of one route carry (default: the first wins). */
  combine?: (first: T, next: T) => T | C,
  /** What a matched route none of whose handlers `pick` recognises gives, by its template (default: nothing). */
  unmarked?: (owner: O, template: string | undefined) => T | undefined,
): T | C | undefined {
  const app = (req as { app?: App }).app;
  // Express 4 keeps the router in `_router`; in Express 5 `router` is a getter (in 4 it throws).
  const stack = (app?._router ?? app?.router)?.stack;
  if (!Array.isArray(stack)) return undefined;
  const path = appPath(req, app!);
  if (path === undefined) return undefined;
  const method = req.method ?? 'GET';
  let byStack = caches.get(owner);
  if (byStack === undefined) {
    byStack = new WeakMap();
    caches.set(owner, byStack);
  }
  let cache = byStack.get(stack) as Cache<T | C> | undefined;
  if (cache === undefined || cache.length !== stack.length) {
    cache = { length: stack.length, results: new Map() };
    byStack.set(stack, cache);
  }
  const key = `${method} ${path}`;
  let found = cache.results.get(key);
  if (found === undefined) {
    const bare =
      unmarked === undefined ? undefined : (template: string | undefined) => unmarked(owner, template);
    found =
      walk<T, C>(
        stack,
        path,
        method,
        (handle, template) => pick(handle, owner, template),
        combine,
        bare,
        '',
      ) ?? NONE;
    if (cache.results.size >= CACHE_SIZE) cache.results.clear();
    cache.results.set(key, found);
  }
  return found ?? undefined;
}

// The path the app's router matches: the original URL's path, less the app's own mount point.
function appPath(req: IncomingMessage, app: App): string | undefined {
  const url = (req as { originalUrl?: string }).originalUrl ?? req.url;
  if (typeof url !== 'string') return undefined;
  const q = url.indexOf('?');
  let path = q < 0 ? url : url.slice(0, q);
  if (app.parent !== undefined && typeof app.mountpath === 'string' && path.startsWith(app.mountpath)) {
    path = path.slice(app.mountpath.length) || '/';
  }
  return path;
}

/**
 * What the marker carries; what `unmarked` gives (else NONE) when a route without a marker matches first;
 * undefined when nothing matches.
 */
function walk<T, C>(
  stack: Layer[],
  path: string,
  method: string,
  pick: (handle: unknown, template: string | undefined) => T | undefined,
  combine: ((first: T, next: T) => T | C) | undefined,
  unmarked: ((template: string | undefined) => T | undefined) | undefined,
  /** The mount points matched so far (Express's `req.baseUrl`). */
  base: string,
): T | C | null | undefined {
  for (const layer of stack) {
    const handle = layer.handle as { stack?: Layer[] } | undefined;
    const own = pick(handle, undefined);
    const route = layer.route;
    const router = Array.isArray(handle?.stack) ? handle.stack : undefined;
    if (route === undefined && own === undefined && router === undefined) continue;
    let matched: boolean | { path: string };
    try {
      matched = layer.match(path);
    } catch {
      return NONE; // Express fails the request too (a malformed URI): the global limiter decides.
    }
    if (!matched) continue;
    if (route !== undefined) {
      const handles = route._handlesMethod?.(method) ?? route._handles_method?.(method) ?? true;
      if (!handles && method !== 'HEAD') continue;
      let found: T | undefined;
      const template = typeof route.path === 'string' ? `${base}${route.path}` : undefined;
      for (const inner of route.stack) {
        const marker = pick(inner.handle, template);
        if (marker === undefined) continue;
        if (combine === undefined) return marker;
        if (found === undefined) found = marker;
        else {
          const combined = combine(found, marker);
          if (combined !== found) return combined as T | C;
        }
      }
      return found ?? unmarked?.(template) ?? NONE;
    }
    if (own !== undefined) return own;
    const prefix = typeof matched === 'object' ? matched.path : (layer.path ?? '');
    let rest = path.slice(prefix.length);
    if (rest[0] !== '/') rest = `/${rest}`;
    const found = walk(router!, rest, method, pick, combine, unmarked, `${base}${prefix}`);
    if (found !== undefined) return found;
  }
  return undefined;
}
