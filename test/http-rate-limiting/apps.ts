import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as honoRateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { rateLimiting as nodeRateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import type { RateLimitingOptions, RouteLimit } from '../../src/http/rate-limiting/options.ts';

/**
 * One tiny application per adapter, built from the same description, so that every scenario runs against
 * node:http, Express 5, Express 4, Fastify 5 and Hono 4 over real sockets.
 *
 * Handlers answer `ok`; `?delay=ms` makes them wait, `?throw=1` makes them throw after the delay; `?used=N` makes
 * them set the response header `x-used: N` the framework's way (a cost for `cost.actual` to read), and
 * `?settle=N` makes them call `rateLimit.settle(N)` themselves.
 */
export interface RouteSpec {
  path: string;
  /** The route's setting: a policy name, an inline policy, or false. Omitted: global only. */
  limit?: RouteLimit;
}

export interface AppSpec {
  // biome-ignore lint/suspicious/noExplicitAny: each adapter narrows onRejected's request and response
  options: RateLimitingOptions<any, any>;
  routes: RouteSpec[];
  /** Register routes before the rate-limiting middleware/plugin (ordering must not matter). */
  routesFirst?: boolean;
  /**
   * An auth middleware/hook before the limiter: a request with `x-user: name` gets a user the framework's way —
   * `req.user` (node, Express), `request.user` (Fastify), `c.set('user')` (Hono) — as `{ id: name }`.
   */
  auth?: boolean;
}

/** The user the auth middleware of {@link AppSpec.auth} set, read the framework's way, whatever the adapter. */
export function userOf(req: unknown): { id: string } | undefined {
  const r = req as { user?: { id: string }; get?: (name: string) => unknown; req?: unknown };
  if (r.req !== undefined && typeof r.get === 'function') return r.get('user') as { id: string } | undefined;
  return r.user;
}

function authenticate(header: string | string[] | undefined): { id: string } | undefined {
  return typeof header === 'string' ? { id: header } : undefined;
}

export interface Running {
  url: string;
  close(): Promise<void>;
}

export type Start = (spec: AppSpec) => Promise<Running>;

function params(url: string | undefined): { delay: number; fail: boolean } {
  const query = new URL(url ?? '/', 'http://x').searchParams;
  return { delay: Number(query.get('delay') ?? 0), fail: query.get('throw') === '1' };
}

/** `?info=1` answers the request's rate-limit info as JSON, read the framework's way (`info`). */
async function work(url: string | undefined, info?: unknown): Promise<string> {
  const { delay, fail } = params(url);
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  if (fail) throw new Error('handler failed on purpose');
  const settle = new URL(url ?? '/', 'http://x').searchParams.get('settle');
  if (settle !== null) (info as { settle(n: number): void }).settle(Number(settle));
  if (new URL(url ?? '/', 'http://x').searchParams.get('info') === '1') return JSON.stringify(info ?? null);
  return 'ok';
}

/** Listens on a free loopback port. */
export function listen(server: http.Server): Promise<Running> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

function usedParam(url: string | undefined): string | null {
  return new URL(url ?? '/', 'http://x').searchParams.get('used');
}

const express4 = createRequire(import.meta.url)('express4') as typeof express;

const pathOf = (url: string | undefined) => (url ?? '/').split('?', 1)[0];

const node: Start = async (spec) => {
  const limit = nodeRateLimiting(spec.options);
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const used = usedParam(req.url);
    if (used !== null) res.setHeader('x-used', used);
    return work(req.url, req.rateLimit).then(
      (body) => res.end(body),
      () => {
        res.statusCode = 500;
        res.end('failed');
      },
    );
  };
  const routes = new Map(spec.routes.map((route) => [route.path, limit(handler, route.limit)]));
  const notFound = limit((_req: IncomingMessage, res: ServerResponse) => {
    res.statusCode = 404;
    res.end();
  });
  return listen(
    http.createServer((req, res) => {
      if (spec.auth) (req as IncomingMessage & { user?: unknown }).user = authenticate(req.headers['x-user']);
      (routes.get(pathOf(req.url)) ?? notFound)(req, res);
    }),
  );
};

function expressApp(factory: typeof express | typeof express4): Start {
  return async (spec) => {
    const app = (factory as typeof express)();
    const limiter = expressRateLimiting(spec.options);
    const handler = (req: express.Request, res: express.Response, next: express.NextFunction) => {
      const used = usedParam(req.url);
      if (used !== null) res.set('x-used', used);
      work(req.url, req.rateLimit).then((body) => res.send(body), next);
    };
    const addRoutes = () => {
      for (const route of spec.routes) {
        if (route.limit === undefined) app.get(route.path, handler);
        else if (route.limit === false) app.get(route.path, limiter.noRateLimit(), handler);
        else app.get(route.path, limiter.requirePolicy(route.limit as string), handler);
      }
    };
    if (spec.auth) {
      app.use((req: express.Request & { user?: unknown }, _res, next) => {
        req.user = authenticate(req.headers['x-user']);
        next();
      });
    }
    if (spec.routesFirst) addRoutes();
    app.use(limiter);
    if (!spec.routesFirst) addRoutes();
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      if (!res.headersSent) res.status(500).send(error.message);
      else res.destroy();
    });
    return listen(http.createServer(app));
  };
}

const fastify: Start = async (spec) => {
  const app = Fastify();
  const addRoutes = () => {
    for (const route of spec.routes) {
      app.get(
        route.path,
        { config: route.limit === undefined ? {} : { rateLimiting: route.limit } },
        (request, reply) => {
          const used = usedParam(request.url);
          if (used !== null) reply.header('x-used', used);
          return work(request.url, request.rateLimit);
        },
      );
    }
  };
  if (spec.auth) {
    app.addHook('onRequest', async (request) => {
      (request as typeof request & { user?: unknown }).user = authenticate(request.headers['x-user']);
    });
  }
  if (spec.routesFirst) addRoutes();
  await app.register(fastifyRateLimiting, spec.options);
  if (!spec.routesFirst) addRoutes();
  await app.ready();
  return listen(app.server);
};

const hono: Start = async (spec) => {
  const app = new Hono();
  const limiter = honoRateLimiting(spec.options);
  const handler = async (c: import('hono').Context) => {
    const used = usedParam(c.req.url);
    if (used !== null) c.header('x-used', used);
    return c.text(await work(c.req.url, c.get('rateLimit')));
  };
  const addRoutes = () => {
    for (const route of spec.routes) {
      if (route.limit === undefined) app.get(route.path, handler);
      else if (route.limit === false) app.get(route.path, limiter.noRateLimit(), handler);
      else app.get(route.path, limiter.requirePolicy(route.limit as string), handler);
    }
  };
  if (spec.auth) {
    app.use(async (c, next) => {
      c.set('user' as never, authenticate(c.req.header('x-user')) as never);
      await next();
    });
  }
  if (spec.routesFirst) addRoutes();
  app.use(limiter);
  if (!spec.routesFirst) addRoutes();
  app.onError((error, c) => c.text(error.message, 500));
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            (server as http.Server).closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
};

/** Runs `check` against one adapter's app built from `spec`, closing it afterwards. */
export async function withApp(
  name: string,
  spec: AppSpec,
  check: (base: string) => Promise<void>,
): Promise<void> {
  const server = await adapters[name](spec);
  try {
    await check(server.url);
  } finally {
    await server.close();
  }
}

export const adapters: Record<string, Start> = {
  node,
  express5: expressApp(express),
  express4: expressApp(express4),
  fastify,
  hono,
};

/** A GET from a given local address (127.0.0.2 is another client of a server on 127.0.0.1), on a fresh connection. */
export function getFrom(
  url: string,
  localAddress: string,
  headers: Record<string, string | string[]> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { localAddress, headers, agent: false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        body += chunk;
      });
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
      );
    });
    request.on('error', reject);
  });
}

/** A GET with a fresh connection per request, so nothing is shared between requests but the server. */
export async function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(url, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}
