/**
 * Type tests (compiled by `npm run typecheck`, never run): a route's `cost` hooks receive the framework's own
 * objects on every adapter, `estimate` may be async, `actual` answers a number or undefined, and the handler's
 * `rateLimit.settle(n)` is typed where each framework keeps the rate-limit info.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExecutionContext } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Context as HonoContext } from 'hono';
import type { Context as KoaContext } from 'koa';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import type { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as honoRateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/rate-limiting.ts';
import { FloodgateModule } from '../../src/adapters/nestjs/index.ts';
import { rateLimiting as nodeRateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { fixedWindow } from '../../src/index.ts';

const tokens = fixedWindow({ permitLimit: 100_000, window: '1m', unit: 'tokens' });

export const express: ReturnType<typeof expressRateLimiting> = expressRateLimiting({
  policies: {
    chat: {
      limiter: tokens,
      cost: {
        estimate: async (req: Request, _res: Response) => Number(req.get('x-max-tokens') ?? 1000),
        actual: (_req, res) => res.locals.tokens as number | undefined,
      },
    },
    // @ts-expect-error estimate answers a number, not a string
    wrong: { limiter: tokens, cost: { estimate: (req: Request) => req.get('x-max-tokens') } },
    other: {
      limiter: tokens,
      // @ts-expect-error Express's hooks get Express's request, not Fastify's
      cost: { estimate: (request: FastifyRequest) => request.routeOptions.bodyLimit },
    },
  },
});

export const node = nodeRateLimiting({
  policies: {
    chat: {
      limiter: tokens,
      cost: {
        estimate: (req: IncomingMessage) => Number(req.headers['content-length'] ?? 1),
        actual: (_req, res: ServerResponse) => Number(res.getHeader('x-tokens')),
      },
    },
    // @ts-expect-error actual answers a number or undefined, not a Promise (it runs when the response has ended)
    late: { limiter: tokens, cost: { estimate: () => 1, actual: async () => 1 } },
  },
});

export const fastifyOptions: Parameters<typeof fastifyRateLimiting>[1] = {
  policies: {
    chat: {
      limiter: tokens,
      cost: {
        estimate: (request: FastifyRequest, _reply: FastifyReply) => (request.body === undefined ? 1 : 100),
        actual: (_request, reply) => Number(reply.getHeader('x-tokens')),
      },
    },
    other: {
      limiter: tokens,
      // @ts-expect-error Fastify's hooks get the reply as their second argument, not node's ServerResponse
      cost: { estimate: (_q: FastifyRequest, reply: ServerResponse) => reply.statusCode },
    },
  },
};

export const hono = honoRateLimiting<{ Variables: { tokens?: number } }>({
  policies: {
    chat: {
      limiter: tokens,
      cost: { estimate: (c) => Number(c.req.header('x-max-tokens')), actual: (c) => c.get('tokens') },
    },
    wrong: {
      limiter: tokens,
      cost: {
        estimate: () => 1,
        // @ts-expect-error c.get('tokens') is typed by the app's Env: a number, never a string
        actual: (c: HonoContext<{ Variables: { tokens?: number } }>) => c.get('tokens')?.toUpperCase(),
      },
    },
  },
});

export const koa = koaRateLimiting({
  policies: {
    chat: {
      limiter: tokens,
      cost: {
        estimate: (ctx: KoaContext) => Number(ctx.get('x-max-tokens')),
        actual: (ctx) => ctx.state.tokens,
      },
    },
  },
});

export const nest = FloodgateModule.forRoot({
  policies: {
    chat: {
      limiter: tokens,
      cost: {
        estimate: (context: ExecutionContext) =>
          Number(context.switchToHttp().getRequest().headers['x-max-tokens']),
        actual: (context) => context.switchToHttp().getResponse().locals?.tokens,
      },
    },
    // @ts-expect-error Nest's hooks get the ExecutionContext, not Express's request
    other: { limiter: tokens, cost: { estimate: (req: Request) => Number(req.get('x')) } },
  },
});

// The handler settles itself, where each framework keeps the rate-limit info.
export const settles = {
  express: (req: Request) => req.rateLimit?.settle(1200),
  node: (req: IncomingMessage) => req.rateLimit?.settle(1200),
  fastify: (request: FastifyRequest) => request.rateLimit?.settle(1200),
  hono: (c: HonoContext) => c.get('rateLimit').settle(1200),
  koa: (ctx: KoaContext) => ctx.state.rateLimit?.settle(1200),
  // @ts-expect-error settle takes a number
  wrong: (req: Request) => req.rateLimit?.settle('1200'),
};
