import type { RequestTimeout, RequestTimeoutContext } from './context.ts';

/**
 * Where a request's timeout lives: a property under a registered symbol on the node request (node:http,
 * Express, Fastify's `request.raw`) or on the Hono `Context`. `Symbol.for` so that two copies of floodgate in
 * one process (a hoisting accident) still find each other's contexts.
 */
export const kRequestTimeout: unique symbol = Symbol.for('floodgate.requestTimeout') as never;

/** Anything a timeout can be attached to: a node `IncomingMessage`/`ServerResponse` or a Hono `Context`. */
export type TimeoutHolder = object & { [kRequestTimeout]?: RequestTimeout };

/**
 * The running timeout of a request, or `undefined` when no timeouts middleware saw it.
 *
 * Pass the node request (`req` in node:http and Express, `request.raw` in Fastify) or the Hono `Context`.
 * The rate limiter uses this to count queue time against the deadline (pass `signal` to `acquire`).
 */
export function requestTimeoutOf(holder: object | null | undefined): RequestTimeout | undefined {
  return (holder as TimeoutHolder | null | undefined)?.[kRequestTimeout];
}

/** Attaches `timeout` to `holder` (adapters only). */
export function attachRequestTimeout(holder: object, timeout: RequestTimeout): void {
  (holder as TimeoutHolder)[kRequestTimeout] = timeout;
}

/**
 * Tells the request's timeout, if any, that nothing more will come of the handler (it rethrew its abort, or the
 * request left a rate limiter's queue at the deadline): in a policy's grace, the policy answers now instead of at
 * its end. Does nothing otherwise.
 */
export function timeoutGaveUp(holder: object): void {
  ((holder as TimeoutHolder)[kRequestTimeout] as RequestTimeoutContext | undefined)?.gaveUp();
}
