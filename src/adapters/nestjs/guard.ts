import type { IncomingMessage, ServerResponse } from 'node:http';
import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Decision, RateLimiting } from '../../http/rate-limiting/engine.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { holdUntilEnd, isThenable, refundWhenDone, waitSignal } from '../../http/rate-limiting/node-http.ts';
import type { RejectedContext } from '../../http/rate-limiting/options.ts';
import type { Answer } from '../../http/rate-limiting/response.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import { RATE_LIMIT_METADATA } from './decorators.ts';
import { RateLimitExceededException } from './exception.ts';
import { graphqlPair, graphqlRejection } from './graphql.ts';
import { FLOODGATE_ENGINE } from './tokens.ts';

const kDecided: unique symbol = Symbol.for('floodgate.rateLimited') as never;
type Decided = { [kDecided]?: RouteLimits };

/**
 * The platform's request and the node objects under it (Express: the same; Fastify: `raw`), and where the
 * decision is kept: the request for a handler, the resolver's `info` for a GraphQL field.
 */
interface HttpPair {
  request: object & { rateLimit?: RateLimitInfo };
  req: IncomingMessage;
  res: ServerResponse;
  marker: object & Decided;
  graphql?: true;
}

/** The pair of an HTTP handler or a GraphQL root field; undefined for what passes (gateways, nested fields). */
function pairOf(context: ExecutionContext): HttpPair | undefined {
  const type = context.getType<string>();
  if (type === 'graphql') return graphqlPair(context);
  if (type !== 'http') return undefined;
  // The arguments themselves, not switchToHttp(): that assigns three new closures onto the context per call.
  const request = context.getArgByIndex<HttpPair['request'] & { raw?: IncomingMessage }>(0);
  const response = context.getArgByIndex<ServerResponse & { raw?: ServerResponse }>(1);
  const req = request.raw !== undefined && typeof request.raw === 'object' ? request.raw : request;
  const res = response.raw !== undefined && typeof response.raw === 'object' ? response.raw : response;
  return { request, req: req as IncomingMessage, res, marker: request };
}

// Queued requests wait with the request timeout's signal when floodgate's timeouts run, else with one that
// aborts when the client goes away. Made once: deciding allocates no closure.
function pairSignal(pair: HttpPair): AbortSignal {
  return waitSignal(pair.req, pair.res);
}

/**
 * The guard that decides rate limiting for HTTP handlers: register it as `APP_GUARD` (every route: the global
 * limiter, and the policy of `@RateLimit()`), or with `@UseGuards(FloodgateGuard)` on some controllers.
 *
 * Each request is decided once, as one all-or-nothing chain of the global limiter and the route's policy, however
 * many times the guard runs for it (a global guard and a controller's `@UseGuards` both): the request carries its
 * decision, and a second run of the guard only checks it. A rejection throws {@link RateLimitExceededException}
 * (an `HttpException`, 429 by default) with `Retry-After` and the RateLimit fields set on the response. A held
 * (concurrency) permit is released when the response has been written or the client went away.
 *
 * GraphQL resolvers are decided too, each root field of an operation once (nested `@ResolveField`s pass): a
 * rejection reaches the client as an error in `errors` with `extensions.code` `'RATE_LIMITED'` and
 * `extensions.retryAfter`, the fields on the HTTP response. Other contexts (WebSocket gateways, microservices)
 * pass through.
 */
export class FloodgateGuard implements CanActivate {
  readonly #routes = new WeakMap<object, WeakMap<object, RouteLimits>>();

  constructor(
    readonly engine: RateLimiting,
    private readonly reflector: Reflector,
  ) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    const pair = pairOf(context);
    if (pair === undefined) return true;
    const route = this.routeOf(context.getClass(), context.getHandler());
    const prior = pair.marker[kDecided];
    if (prior !== undefined && prior.owner === this.engine) {
      if (prior === route) return true;
      throw new Error(
        `floodgate: this handler requires rate-limiting policy ${JSON.stringify(route.policy?.name ?? 'none')} but ` +
          'the request was already decided with another; global and route policy must be decided together',
      );
    }
    pair.marker[kDecided] = route;
    if (route.unlimited) return true;
    const pending = this.engine.decide(context, context, route, pairSignal, pair);
    if (isThenable(pending)) return pending.then((decision) => this.#decided(decision, context, pair));
    return this.#decided(pending, context, pair);
  }

  /** The route limits of a handler, from its (or its controller's) decorator; validated once, then kept. */
  routeOf(controller: object, handler: object): RouteLimits {
    let byHandler = this.#routes.get(controller);
    if (byHandler === undefined) {
      byHandler = new WeakMap();
      this.#routes.set(controller, byHandler);
    }
    let route = byHandler.get(handler);
    if (route === undefined) {
      const setting = this.reflector.getAllAndOverride<unknown>(RATE_LIMIT_METADATA, [
        handler as never,
        controller as never,
      ]);
      const name = (handler as { name?: string }).name;
      const where = `@RateLimit() on ${(controller as { name?: string }).name ?? 'a controller'}.${name ?? 'handler'}`;
      route = this.engine.route(setting, where);
      byHandler.set(handler, route);
    }
    return route;
  }

  #decided(decision: Decision, context: ExecutionContext, pair: HttpPair): boolean | Promise<boolean> {
    // The client left the queue, or the request timed out (and its timeout answered): nothing more to do.
    if (decision.result === 'canceled') return false;
    const engine = this.engine;
    if (decision.lease !== undefined) pair.request.rateLimit = decision; // the decision is its own RateLimitInfo
    if (decision.lease !== undefined && !decision.lease.granted) {
      const hook = decision.route.onRejected;
      if (hook === undefined) {
        if (!engine.options.dryRun) this.#reject(engine.rejection(decision), decision, pair);
      } else {
        const answer = engine.rejectedContext(decision, context, context);
        const outcome = hook(answer as RejectedContext<ExecutionContext, ExecutionContext>);
        if (isThenable(outcome)) {
          return Promise.resolve(outcome).then(() => this.#afterHook(answer, decision, context, pair));
        }
        return this.#afterHook(answer, decision, context, pair);
      }
    }
    return this.#admit(decision, context, pair);
  }

  #afterHook(
    answer: RejectedContext,
    decision: Decision,
    context: ExecutionContext,
    pair: HttpPair,
  ): boolean {
    if (!this.engine.options.dryRun) this.#reject(answer, decision, pair);
    return this.#admit(decision, context, pair);
  }

  #reject(answer: Answer, decision: Decision, pair: HttpPair): never {
    const res = pair.res;
    if (!res.headersSent) {
      // The exception filter writes the body (and its type); the rest of the fields go on the response now.
      for (const [name, value] of answer.headers) {
        if (name.length !== 12 || name.toLowerCase() !== 'content-type') res.setHeader(name, value);
      }
    }
    const problem = this.engine.options.body !== 'text';
    const body = problem ? (JSON.parse(answer.body) as Record<string, unknown>) : answer.body;
    // A 429 is an answer, not a fault: no stack trace is captured for it. Capturing one under Nest's deep
    // synchronous stack of router, guards and Express layers was most of a rejection's cost (HOT=1 bench:nestjs).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    let exception: RateLimitExceededException;
    try {
      const { lease, route } = decision;
      exception = pair.graphql
        ? graphqlRejection(body, answer.status, answer.headers, lease!, route.policy?.name)
        : new RateLimitExceededException(body, answer.status, answer.headers, lease!, route.policy?.name);
    } finally {
      Error.stackTraceLimit = limit;
    }
    throw exception;
  }

  #admit(decision: Decision, context: ExecutionContext, pair: HttpPair): boolean {
    const engine = this.engine;
    if (engine.options.headers.length > 0 && decision.lease !== undefined && !pair.res.headersSent) {
      engine.setHeaders(decision, pair.res, setHeader);
    }
    holdUntilEnd(engine, pair.res, decision);
    if (decision.refundable) refundWhenDone(engine, context, context, pair.res, decision);
    return true;
  }
}

function setHeader(res: ServerResponse, name: string, value: string): void {
  res.setHeader(name, value);
}

// Nest's dependency injection, applied as calls: floodgate is compiled without decorator syntax.
Injectable()(FloodgateGuard);
Inject(FLOODGATE_ENGINE)(FloodgateGuard, undefined as never, 0);
Inject(Reflector)(FloodgateGuard, undefined as never, 1);
