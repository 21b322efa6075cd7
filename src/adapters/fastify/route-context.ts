import type { FastifyRequest } from 'fastify';

// `request.routeOptions` builds a fresh object on every read; the route's config object itself sits under
// Fastify's context symbol. Found once by its description, with the public getter as the fallback.
let kRouteContext: symbol | null | undefined;

/** The `config` of the route a request reached, read without `routeOptions`' per-read allocation. */
export function routeConfigOf(request: FastifyRequest): unknown {
  if (kRouteContext === undefined) {
    kRouteContext =
      Object.getOwnPropertySymbols(request).find((s) => s.description === 'fastify.context') ?? null;
  }
  const context =
    kRouteContext === null
      ? undefined
      : (request as unknown as Record<symbol, { config?: unknown }>)[kRouteContext];
  return context?.config ?? request.routeOptions.config;
}
