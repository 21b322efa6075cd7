/**
 * One neutral description of routes, served by each of the four adapters over a real socket, so that the
 * same table of cases runs against all of them.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { serve } from '@hono/node-server';
import express5 from 'express';
import Fastify, { type FastifyReply } from 'fastify';
import { Hono, type MiddlewareHandler } from 'hono';
import { requestTimeouts as expressTimeouts } from '../../src/adapters/express/index.ts';
import { requestTimeouts as fastifyTimeouts } from '../../src/adapters/fastify/index.ts';
import { requestTimeouts as honoTimeouts } from '../../src/adapters/hono/index.ts';
import { requestTimeouts as nodeTimeouts } from '../../src/adapters/node/index.ts';
import type { RequestTimeout, RequestTimeoutsOptions, RouteTimeout } from '../../src/http/index.ts';
import { requestTimeoutOf } from '../../src/http/index.ts';

// Express 4 is installed under an alias and has no types of its own; its API is the part Express 5 kept.
const express4 = createRequire(import.meta.url)('express4') as typeof express5;

/** What a neutral handler can do, mapped onto each framework's idiom. */
export interface Io {
  readonly timeout: RequestTimeout;
  send(status: number, body: string, headers?: Record<string, string>): void;
  /** Starts a chunked body with a first chunk. */
  stream(status: number, first: string): void;
  write(chunk: string): void;
  end(): void;
}

export interface RouteDef {
  path: string;
  timeout?: RouteTimeout;
  /** A middleware that runs after the timeouts middleware (a rate limiter's queue, say). */
  before?: (timeout: RequestTimeout) => Promise<void>;
  handler: (io: Io) => Promise<void> | void;
}

export interface Served {
  url: string;
  /** Errors thrown at handlers by their framework (a late write that throws), and errors logged. */
  errors: unknown[];
  close(): Promise<void>;
}

export type AdapterName = 'node' | 'express5' | 'express4' | 'fastify' | 'hono';
export const ADAPTERS: AdapterName[] = ['node', 'express5', 'express4', 'fastify', 'hono'];

// Handler calls after the deadline must not throw; any that does is recorded here by the harness.
function guard(errors: unknown[], fn: () => void): void {
  try {
    fn();
  } catch (error) {
    errors.push(error);
  }
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

function nodeIo(res: ServerResponse, timeout: RequestTimeout, errors: unknown[]): Io {
  return {
    timeout,
    send: (status, body, headers) =>
      guard(errors, () => {
        res.writeHead(status, { 'content-type': 'text/plain', ...headers });
        res.end(body);
      }),
    stream: (status, first) =>
      guard(errors, () => {
        res.writeHead(status, { 'content-type': 'text/plain' });
        res.write(first);
      }),
    write: (chunk) => guard(errors, () => res.write(chunk)),
    end: () => guard(errors, () => res.end()),
  };
}

async function serveNode(options: RequestTimeoutsOptions, routes: RouteDef[]): Promise<Served> {
  const errors: unknown[] = [];
  const wrap = nodeTimeouts(options);
  const table = new Map(
    routes.map((r) => [
      r.path,
      wrap(async (req: IncomingMessage, res: ServerResponse) => {
        const timeout = requestTimeoutOf(req)!;
        if (r.before) {
          try {
            await r.before(timeout);
          } catch {
            return;
          }
        }
        await r.handler(nodeIo(res, timeout, errors));
      }, r.timeout),
    ]),
  );
  const server = http.createServer((req, res) => {
    const handler = table.get(req.url!.split('?')[0]);
    if (handler) handler(req, res);
    else res.writeHead(404).end();
  });
  return { url: await listen(server), errors, close: () => closeServer(server) };
}

async function serveExpress(
  express: typeof express5,
  options: RequestTimeoutsOptions,
  routes: RouteDef[],
): Promise<Served> {
  const errors: unknown[] = [];
  const app = express();
  app.set('env', 'production');
  const timeouts = expressTimeouts(options);
  app.use(timeouts);
  for (const r of routes) {
    const chain: express5.RequestHandler[] = [];
    if (r.timeout !== undefined) chain.push(timeouts.route(r.timeout) as express5.RequestHandler);
    if (r.before) {
      const before = r.before;
      chain.push((req, _res, next) => {
        before(requestTimeoutOf(req)!).then(
          () => next(),
          () => {},
        );
      });
    }
    chain.push((req, res, next) => {
      const timeout = requestTimeoutOf(req)!;
      const io: Io = {
        timeout,
        send: (status, body, headers) =>
          guard(errors, () =>
            res
              .status(status)
              .set(headers ?? {})
              .type('text')
              .send(body),
          ),
        stream: (status, first) =>
          guard(errors, () => {
            res.status(status).type('text');
            res.write(first);
          }),
        write: (chunk) => guard(errors, () => res.write(chunk)),
        end: () => guard(errors, () => res.end()),
      };
      // A rejection goes where Express sends errors (Express 4 would not catch it on its own).
      Promise.resolve(r.handler(io)).catch(next);
    });
    app.get(r.path, ...chain);
  }
  app.use(timeouts.lateAborts);
  app.use((error: unknown, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
    errors.push(error);
    if (!res.headersSent) res.status(500).send('error');
  });
  const server = http.createServer(app);
  return { url: await listen(server), errors, close: () => closeServer(server) };
}

async function serveFastify(options: RequestTimeoutsOptions, routes: RouteDef[]): Promise<Served> {
  const errors: unknown[] = [];
  const logs = new PassThrough();
  logs.on('data', (line: Buffer) => {
    const entry = JSON.parse(line.toString());
    if (entry.level >= 40)
      errors.push(new Error(`fastify logged (${entry.level}): ${entry.msg} ${entry.err?.message ?? ''}`));
  });
  const app = Fastify({ logger: { level: 'info', stream: logs } });
  await app.register(fastifyTimeouts, options);
  for (const r of routes) {
    const before = r.before;
    app.get(
      r.path,
      {
        config: r.timeout === undefined ? {} : { timeout: r.timeout },
        preHandler: before ? async (request) => before(request.requestTimeout!) : undefined,
      },
      async (request, reply: FastifyReply) => {
        let body: PassThrough | undefined;
        const io: Io = {
          timeout: request.requestTimeout!,
          send: (status, text, headers) =>
            guard(errors, () =>
              reply
                .code(status)
                .headers(headers ?? {})
                .type('text/plain')
                .send(text),
            ),
          stream: (status, first) =>
            guard(errors, () => {
              body = new PassThrough();
              body.write(first);
              reply.code(status).type('text/plain').send(body);
            }),
          write: (chunk) => guard(errors, () => body!.write(chunk)),
          end: () => guard(errors, () => body!.end()),
        };
        await r.handler(io);
        return reply;
      },
    );
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    errors,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}

async function serveHono(options: RequestTimeoutsOptions, routes: RouteDef[]): Promise<Served> {
  const errors: unknown[] = [];
  const app = new Hono();
  const timeouts = honoTimeouts(options);
  app.use(timeouts);
  app.onError((error, c) => {
    // As the docs advise: a handler's own abort after its deadline is expected, its answer discarded anyway.
    if (!requestTimeoutOf(c)?.timedOut) errors.push(error);
    return c.text('error', 500);
  });
  for (const r of routes) {
    const chain: MiddlewareHandler[] = [];
    if (r.timeout !== undefined) chain.push(timeouts.route(r.timeout));
    if (r.before) {
      const before = r.before;
      chain.push(async (c, next) => {
        try {
          await before(c.get('requestTimeout'));
        } catch {
          // Aborted: the timeouts middleware answers; this never continues.
          await new Promise(() => {});
        }
        await next();
      });
    }
    const route = app.get.bind(app) as unknown as (path: string, ...handlers: MiddlewareHandler[]) => void;
    route(r.path, ...chain, (c) => {
      return new Promise<Response>((resolve, reject) => {
        const encoder = new TextEncoder();
        let writer: WritableStreamDefaultWriter<Uint8Array> | undefined;
        const io: Io = {
          timeout: c.get('requestTimeout'),
          send: (status, body, headers) => guard(errors, () => resolve(c.text(body, status as 200, headers))),
          stream: (status, first) =>
            guard(errors, () => {
              const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
              writer = writable.getWriter();
              writer.write(encoder.encode(first)).catch(() => {});
              resolve(new Response(readable, { status, headers: { 'content-type': 'text/plain' } }));
            }),
          write: (chunk) => guard(errors, () => void writer!.write(encoder.encode(chunk)).catch(() => {})),
          end: () => guard(errors, () => void writer!.close().catch(() => {})),
        };
        Promise.resolve(r.handler(io)).catch(reject);
      });
    });
  }
  let server!: http.Server;
  const url = await new Promise<string>((resolve) => {
    server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
      resolve(`http://127.0.0.1:${info.port}`),
    ) as http.Server;
  });
  return { url, errors, close: () => closeServer(server) };
}

/** Serves `routes` with `options` through the named adapter on a free loopback port. */
export function serveWith(
  adapter: AdapterName,
  options: RequestTimeoutsOptions,
  routes: RouteDef[],
): Promise<Served> {
  switch (adapter) {
    case 'node':
      return serveNode(options, routes);
    case 'express5':
      return serveExpress(express5, options, routes);
    case 'express4':
      return serveExpress(express4, options, routes);
    case 'fastify':
      return serveFastify(options, routes);
    case 'hono':
      return serveHono(options, routes);
  }
}
