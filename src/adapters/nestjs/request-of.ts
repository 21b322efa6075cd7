import type { ExecutionContext } from '@nestjs/common';

/** The GraphQL context fields where Nest's drivers keep the HTTP request (Apollo: `req`; Mercurius: `reply`). */
interface GraphQLContextLike {
  req?: object;
  request?: object;
  reply?: { request?: object };
}

/**
 * The platform's request (Express `Request`, `FastifyRequest`) of an HTTP handler or of a GraphQL resolver, from
 * the GraphQL context (`req` with the Apollo driver, `reply.request` with Mercurius); `undefined` for other
 * contexts (WebSocket gateways, microservices) and for a GraphQL operation that did not come over HTTP.
 *
 * Use it in key functions that must work for controllers and resolvers alike:
 * `key: (context) => requestOf<{ user?: User }>(context)?.user?.id ?? 'anonymous'`.
 */
export function requestOf<T extends object = object>(context: ExecutionContext): T | undefined {
  const type = context.getType<string>();
  // What switchToHttp().getRequest() returns, without the three closures switchToHttp() makes per call.
  if (type === 'http') return context.getArgByIndex<T>(0);
  if (type !== 'graphql') return undefined;
  const gql = context.getArgByIndex<GraphQLContextLike | undefined>(2);
  if (typeof gql !== 'object' || gql === null) return undefined;
  const request = gql.req ?? gql.request ?? gql.reply?.request;
  return typeof request === 'object' && request !== null ? (request as T) : undefined;
}
