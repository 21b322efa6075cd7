import type { IncomingMessage, ServerResponse } from 'node:http';
import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Decision, RateLimiting } from '../../http/rate-limiting/engine.ts';
import { type Answers, Flow, type Verdict } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { isThenable, waitSignal } from '../../http/rate-limiting/node-http.ts';
import type { Answer } from '../../http/rate-limiting/response.ts';
import type { RouteLimits } from '../../http/rate-limiting/route.ts';
import { RATE_LIMIT_METADATA } from './decorators.ts';
import { RateLimitExceededException } from './exception.ts';
import { graphqlPair, graphqlRejection } from './graphql.ts';
import { FLOODGATE_ENGINE } from './tokens.ts';

/**
 * The platform's request and the node objects under it (Express: the same; Fastify: `raw`), and where the
 * decision is kept: the request for a handler, the resolver's `info` for a GraphQL field.
 */
interface HttpPair {
  request: object & { rateLimit?: RateLimitInfo };
  req: IncomingMessage;
  res: ServerResponse;
  marker: object;
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

/**
 * A rejection is the exception Nest's filters answer with: `Retry-After` and the RateLimit fields go on the
 * response now, the body (and its type) is the filter's to write.
 */
function reject(pair: HttpPair, answer: Answer, decision: Decision): never {
  const res = pair.res;
  // A JSON body (problem+json, or an object onRejected gave) goes to the filter as the object it is.
  let json = false;
  for (const [name, value] of answer.headers) {
    if (name.length !== 12 || name.toLowerCase() !== 'content-type') {
      if (!res.headersSent) res.setHeader(name, value);
    } else json = value.includes('json');
  }
  const body = json ? jsonOrText(answer.body) : answer.body;
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

// A hook may set a text body and leave the JSON content type of `body: 'problem+json'`: sent as the text.
function jsonOrText(body: string): string | Record<string, unknown> {
  try {
    return JSON.parse(body) as Record<string, unknown>;
  } catch {
    return body;
  }
}

const pairAnswers: Answers<HttpPair> = {
  // The request timeout's signal when floodgate's timeouts run, else one that aborts when the client goes away.
  signal: (pair) => waitSignal(pair.req, pair.res),
  node: (pair) => pair.res,
  timeout: (pair) => pair.req,
  info: (pair, info) => {
    pair.request.rateLimit = info;
  },
  header: (pair, name, value) => {
    pair.res.setHeader(name, value);
  },
  sent: (pair) => pair.res.headersSent,
  answeredBy: () => false,
  send: reject,
};

// Admitted: the handler runs. A request that left the queue (its client went away, or its timeout answered) has
// nothing more to do; a rejection threw before a verdict could say so.
function activates(verdict: Verdict): boolean {
  return typeof verdict !== 'string';
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
  readonly #flow: Flow<HttpPair>;

  constructor(
    readonly engine: RateLimiting,
    private readonly reflector: Reflector,
  ) {
    this.#flow = new Flow(engine, pairAnswers);
  }

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    const pair = pairOf(context);
    if (pair === undefined) return true;
    const route = this.routeOf(context.getClass(), context.getHandler());
    const flow = this.#flow;
    const prior = flow.prior(pair.marker);
    if (prior !== undefined) {
      if (prior === route) return true;
      throw new Error(
        `floodgate: this handler requires rate-limiting policy ${JSON.stringify(route.policy?.name ?? 'none')} but ` +
          'the request was already decided with another; global and route policy must be decided together',
      );
    }
    flow.mark(pair.marker, route);
    if (route.unlimited) return true;
    const verdict = flow.decide(route, context, context, pair);
    return isThenable(verdict) ? verdict.then(activates) : activates(verdict);
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
}

// Nest's dependency injection, applied as calls: floodgate is compiled without decorator syntax.
Injectable()(FloodgateGuard);
Inject(FLOODGATE_ENGINE)(FloodgateGuard, undefined as never, 0);
Inject(Reflector)(FloodgateGuard, undefined as never, 1);
