/**
 * One application per adapter with both halves of floodgate installed the way the docs say (timeouts first,
 * then rate limiting, then routes with their markers), built from one description, served over a real socket.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import Router from '@koa/router';
import express5 from 'express';
import Fastify from 'fastify';
import { Hono, type MiddlewareHandler } from 'hono';
import Koa from 'koa';
import { rateLimiting as expressLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { requestTimeouts as expressTimeouts } from '../../src/adapters/express/timeouts.ts';
import { rateLimiting as fastifyLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { requestTimeouts as fastifyTimeouts } from '../../src/adapters/fastify/timeouts.ts';
import { rateLimiting as honoLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { requestTimeouts as honoTimeouts } from '../../src/adapters/hono/timeouts.ts';
import { rateLimiting as koaLimiting } from '../../src/adapters/koa/rate-limiting.ts';
import { requestTimeouts as koaTimeouts } from '../../src/adapters/koa/timeouts.ts';
import { rateLimiting as nodeLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { requestTimeouts as nodeTimeouts } from '../../src/adapters/node/timeouts.ts';
import type { RateLimitingOptions } from '../../src/http/rate-limiting/options.ts';
import type { RequestTimeoutsOptions } from '../../src/http/timeouts/options.ts';
import { requestTimeoutOf } from '../../src/http/timeouts/registry.ts';
import type { RouteTimeout } from '../../src/http/timeouts/route.ts';

const express4 = createRequire(import.meta.url)('express4') as typeof express5;

/** A neutral handler: gets the request's timeout signal (if any) and returns the body of a 200. */
export type Handler = (signal: AbortSignal | undefined) => Promise<string> | string;

export interface StackRoute {
  path: string;
  /** A rate-limiting policy name for the route's marker / setting. */
  limit?: string;
  timeout?: RouteTimeout;
  /** Put the route's timeout marker after its rate-limiting marker (Express and Hono). */
  timeoutLast?: boolean;
  handler: Handler;
}

export interface StackSpec {
  timeouts?: RequestTimeoutsOptions;
  // biome-ignore lint/suspicious/noExplicitAny: each adapter narrows the hooks' request and response
  limits: RateLimitingOptions<any, any>;
  routes: StackRoute[];
}

export interface Stack {
  url: string;
  /** Errors that reached the framework's error handler. */
  errors: unknown[];
  close(): Promise<void>;
}

export type StackAdapter = 'node' | 'express5' | 'express4' | 'fastify' | 'hono' | 'koa';
export const STACK_ADAPTERS: StackAdapter[] = ['node', 'express5', 'express4', 'fastify', 'hono', 'koa'];

async function listen(server: http.Server, errors: unknown[]): Promise<Stack> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return stackOn(server, errors);
}

function stackOn(server: http.Server, errors: unknown[]): Stack {
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    errors,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

const pathOf = (url: string | undefined) => (url ?? '/').split('?', 1)[0];

async function node(spec: StackSpec): Promise<Stack> {
  const errors: unknown[] = [];
  const limit = nodeLimiting(spec.limits);
  const timed = spec.timeouts ? nodeTimeouts(spec.timeouts) : undefined;
  const table = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();
  for (const route of spec.routes) {
    const inner = limit(async (req: IncomingMessage, res: ServerResponse) => {
      const body = await route.handler(requestTimeoutOf(req)?.signal);
      res.end(body);
    }, route.limit);
    table.set(route.path, timed ? timed(inner, route.timeout) : inner);
  }
  return listen(
    http.createServer((req, res) => {
      const handler = table.get(pathOf(req.url));
      if (handler) handler(req, res);
      else res.writeHead(404).end();
    }),
    errors,
  );
}

function express(factory: typeof express5): (spec: StackSpec) => Promise<Stack> {
  return async (spec) => {
    const errors: unknown[] = [];
    const app = factory();
    app.set('env', 'production');
    const timeouts = spec.timeouts ? expressTimeouts(spec.timeouts) : undefined;
    const limiter = expressLimiting(spec.limits);
    if (timeouts) app.use(timeouts);
    app.use(limiter);
    for (const route of spec.routes) {
      const chain: express5.RequestHandler[] = [];
      const timeoutMarker =
        timeouts && route.timeout !== undefined ? [timeouts.route(route.timeout)] : ([] as never[]);
      const limitMarker = route.limit ? [limiter.requirePolicy(route.limit)] : [];
      if (route.timeoutLast) chain.push(...(limitMarker as never[]), ...(timeoutMarker as never[]));
      else chain.push(...(timeoutMarker as never[]), ...(limitMarker as never[]));
      chain.push((req, res, next) => {
        Promise.resolve()
          .then(() => route.handler(requestTimeoutOf(req)?.signal))
          .then((body) => res.send(body), next);
      });
      app.get(route.path, ...chain);
    }
    if (timeouts) app.use(timeouts.lateAborts);
    app.use(
      (error: unknown, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
        errors.push(error);
        if (!res.headersSent) res.status(500).send('error');
        else res.destroy();
      },
    );
    return listen(http.createServer(app), errors);
  };
}

async function fastify(spec: StackSpec): Promise<Stack> {
  const errors: unknown[] = [];
  const app = Fastify();
  app.setErrorHandler((error, _request, reply) => {
    errors.push(error);
    reply.code(500).send('error');
  });
  if (spec.timeouts) await app.register(fastifyTimeouts, spec.timeouts);
  await app.register(fastifyLimiting, spec.limits);
  for (const route of spec.routes) {
    const config: Record<string, unknown> = {};
    if (route.limit) config.rateLimit = route.limit;
    if (route.timeout !== undefined) config.timeout = route.timeout;
    app.get(route.path, { config }, async (request) => route.handler(request.requestTimeout?.signal));
  }
  await app.ready();
  return listen(app.server, errors);
}

async function hono(spec: StackSpec): Promise<Stack> {
  const errors: unknown[] = [];
  const app = new Hono();
  const timeouts = spec.timeouts ? honoTimeouts(spec.timeouts) : undefined;
  const limiter = honoLimiting(spec.limits);
  if (timeouts) app.use(timeouts);
  app.use(limiter);
  app.onError((error, c) => {
    if (!requestTimeoutOf(c)?.timedOut) errors.push(error);
    return c.text('error', 500);
  });
  for (const route of spec.routes) {
    const timeoutMarker = timeouts && route.timeout !== undefined ? [timeouts.route(route.timeout)] : [];
    const limitMarker = route.limit ? [limiter.requirePolicy(route.limit)] : [];
    const chain: MiddlewareHandler[] = route.timeoutLast
      ? [...limitMarker, ...timeoutMarker]
      : [...timeoutMarker, ...limitMarker];
    const add = app.get.bind(app) as unknown as (path: string, ...handlers: MiddlewareHandler[]) => void;
    add(route.path, ...chain, async (c) => c.text(await route.handler(requestTimeoutOf(c)?.signal)));
  }
  const server = await new Promise<http.Server>((resolve) => {
    const created = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () =>
      resolve(created as http.Server),
    );
  });
  return stackOn(server, errors);
}

async function koa(spec: StackSpec): Promise<Stack> {
  const errors: unknown[] = [];
  const app = new Koa();
  app.on('error', (error: unknown) => errors.push(error));
  const timeouts = spec.timeouts ? koaTimeouts(spec.timeouts) : undefined;
  const limiter = koaLimiting(spec.limits);
  if (timeouts) app.use(timeouts);
  app.use(limiter);
  const router = new Router();
  for (const route of spec.routes) {
    const timeoutMarker = timeouts && route.timeout !== undefined ? [timeouts.route(route.timeout)] : [];
    const limitMarker = route.limit ? [limiter.requirePolicy(route.limit)] : [];
    const chain: Koa.Middleware[] = route.timeoutLast
      ? [...limitMarker, ...timeoutMarker]
      : [...timeoutMarker, ...limitMarker];
    router.get(route.path, ...(chain as never[]), async (ctx) => {
      ctx.body = await route.handler(requestTimeoutOf(ctx.req)?.signal);
    });
  }
  app.use(router.routes());
  return listen(http.createServer(app.callback()), errors);
}

export function startStack(adapter: StackAdapter, spec: StackSpec): Promise<Stack> {
  switch (adapter) {
    case 'node':
      return node(spec);
    case 'express5':
      return express(express5)(spec);
    case 'express4':
      return express(express4)(spec);
    case 'fastify':
      return fastify(spec);
    case 'hono':
      return hono(spec);
    case 'koa':
      return koa(spec);
  }
}

/** A handler that never settles. */
export const never: Handler = () => new Promise<string>(() => {});

/** Waits (a bounded number of short ticks) until `check()` holds; returns whether it did. Never asserts time. */
export async function eventually(check: () => boolean, ticks = 300): Promise<boolean> {
  for (let i = 0; i < ticks; i++) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return check();
}

/** A GET whose client goes away after `admitted()` holds (or at once if it never does). */
export function getThenLeave(url: string, admitted: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const req = http.get(url, () => {});
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    eventually(admitted).then(() => req.destroy());
  });
}

/** A GET on a fresh connection: status and body, or status 0 when the connection was closed under it. */
export async function fetchText(url: string): Promise<{ status: number; body: string }> {
  try {
    const response = await fetch(url);
    return { status: response.status, body: await response.text() };
  } catch {
    return { status: 0, body: '' };
  }
}
