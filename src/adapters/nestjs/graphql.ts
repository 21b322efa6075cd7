import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExecutionContext } from '@nestjs/common';
import { retryAfterSeconds } from '../../http/ratelimit-headers.ts';
import type { Lease } from '../../limiters/lease.ts';
import { RateLimitExceededException } from './exception.ts';
import { requestOf } from './request-of.ts';

/** What `FloodgateGuard` decides a GraphQL resolver call with. */
export interface GraphQLPair {
  /** The platform's request: it gets `rateLimit`. */
  request: object;
  req: IncomingMessage;
  res: ServerResponse;
  /** Where the call's decision is kept: the resolver's `info`, one per field resolved. */
  marker: object;
  graphql: true;
}

interface ResolveInfoLike {
  path?: { prev?: unknown };
}

/** The extension code of a rate-limited resolver's error in the response's `errors`. */
export const RATE_LIMITED_CODE = 'RATE_LIMITED';

/**
 * The request of a GraphQL resolver call that rate limiting decides, or `undefined` when it passes untouched: a
 * nested field (`@ResolveField`; only the operation's root fields count, else a list of a hundred items would
 * take a hundred permits), or an operation that did not come over HTTP (a subscription over WebSocket).
 */
export function graphqlPair(context: ExecutionContext): GraphQLPair | undefined {
  const info = context.getArgByIndex<ResolveInfoLike | undefined>(3);
  if (typeof info !== 'object' || info === null) return undefined;
  if (info.path?.prev !== undefined) return undefined;
  const request = requestOf<{ raw?: IncomingMessage; res?: ServerResponse }>(context);
  if (request === undefined) return undefined;
  const gql = context.getArgByIndex<{ res?: object; reply?: object }>(2);
  const response = (gql.res ?? gql.reply ?? request.res) as
    | (ServerResponse & { raw?: ServerResponse })
    | undefined;
  if (response === undefined) {
    // A held permit is released, and a refund decided, when the response ends: without it neither can happen.
    throw new Error(
      'floodgate: the GraphQL context has the request but not the response; make the driver put it there ' +
        "(GraphQLModule.forRoot({ context: ({ req, res }) => ({ req, res }) }), or with Fastify's reply: `reply`)",
    );
  }
  const req = request.raw !== undefined && typeof request.raw === 'object' ? request.raw : request;
  const res = response.raw !== undefined && typeof response.raw === 'object' ? response.raw : response;
  return { request, req: req as IncomingMessage, res, marker: info, graphql: true };
}

/**
 * The rejection of a GraphQL resolver call: a {@link RateLimitExceededException} whose `extensions`
 * (`code: 'RATE_LIMITED'`, `retryAfter` in seconds, the `policy`) GraphQL puts on the error it returns in the
 * response's `errors`. Its response has no `statusCode`, so Nest's Apollo driver keeps that code instead of
 * turning every HttpException other than 400/401/403/422 into an INTERNAL_SERVER_ERROR.
 */
export function graphqlRejection(
  body: string | Record<string, unknown>,
  status: number,
  headers: Iterable<[string, string]>,
  lease: Lease,
  policy: string | undefined,
): RateLimitExceededException {
  const message = typeof body === 'string' ? body : String(body.detail ?? body.title ?? 'Too many requests.');
  const extensions: Record<string, unknown> = { code: RATE_LIMITED_CODE };
  if (lease.retryAfterMs !== undefined) extensions.retryAfter = retryAfterSeconds(lease.retryAfterMs);
  if (policy !== undefined) extensions.policy = policy;
  return new RateLimitExceededException({ message }, status, headers, lease, policy, extensions);
}
