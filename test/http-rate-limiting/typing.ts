import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as honoRateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { rateLimiting as nodeRateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { clientIp } from '../../src/http/client-ip.ts';
import { chain, fixedWindow, partitioned } from '../../src/index.ts';

interface User {
  id: string;
}
declare global {
  namespace Express {
    interface Request {
      user?: User;
    }
  }
}
declare module 'fastify' {
  interface FastifyRequest {
    user?: User;
  }
}

const ip = clientIp();
const perMinute = fixedWindow({ permitLimit: 100, window: '1m' });

export const express = expressRateLimiting({
  global: partitioned({ key: (req) => req.user?.id ?? ip(req), limiter: perMinute }),
  policies: {
    both: chain(
      partitioned({ key: (req: Request) => req.user?.id ?? ip(req), limiter: perMinute }),
      perMinute,
    ),
  },
  onRejected: (ctx) => ctx.response.status(429),
  // priority(req, res) gets Express's own objects, and answers a class.
  priority: (req, res) => (req.user === undefined || res.locals.batch ? 'sheddable' : 'default'),
});
export function fastify() {
  return fastifyRateLimiting;
}
export const fastifyOptions: Parameters<typeof fastifyRateLimiting>[1] = {
  global: partitioned({ key: (request) => request.user?.id ?? ip(request), limiter: perMinute }),
  priority: (request, reply) => (request.user === undefined || reply.sent ? 0 : 'critical'),
};
export const hono = honoRateLimiting<{ Variables: { user?: User } }>({
  global: partitioned({ key: (c) => c.get('user')?.id ?? ip(c), limiter: perMinute }),
  priority: (c) => (c.get('user') === undefined ? 'sheddable' : 'default'),
});
interface Authed extends IncomingMessage {
  user?: User;
}
export const node = nodeRateLimiting<Authed>({
  global: partitioned({ key: (req) => req.user?.id ?? ip(req), limiter: perMinute }),
  policies: { api: { limiter: perMinute, priority: (req) => (req.user === undefined ? 'sheddable' : 2) } },
});
export const nodeDefault = nodeRateLimiting({
  global: partitioned({ key: (req) => req.headers['x-user']?.toString() ?? ip(req), limiter: perMinute }),
});
export const honoDefault = honoRateLimiting({
  global: partitioned({ key: (c) => c.req.header('x-user') ?? ip(c), limiter: perMinute }),
});

// The rate limit on the request, typed on every adapter.
export const infoTypes = {
  express: (req: Request): number | undefined => req.rateLimit?.remaining,
  node: (req: IncomingMessage): string | undefined => req.rateLimit?.policy,
  fastify: (request: import('fastify').FastifyRequest): number | undefined => request.rateLimit?.limit,
  hono: (c: import('hono').Context): readonly { name: string }[] => c.get('rateLimit').policies,
};

// The form users write: Fastify's register() infers the options from the plugin, so the key function sees the
// app's FastifyRequest (with its augmentation) without an annotation.
export async function fastifyRegister(app: import('fastify').FastifyInstance) {
  await app.register(fastifyRateLimiting, {
    global: partitioned({ key: (request) => request.user?.id ?? ip(request), limiter: perMinute }),
    policies: {
      login: {
        limiter: partitioned({ key: (request) => request.ip, limiter: perMinute }),
        skipSuccessfulRequests: true,
      },
    },
    skip: (request) => request.url === '/health',
    onRejected: (ctx) => ctx.response.code(429),
  });
}
export async function fastifyRegisterChecked(app: import('fastify').FastifyInstance) {
  // @ts-expect-error a skip that is not a function is refused by the plugin's options type
  await app.register(fastifyRateLimiting, { skip: 1 });
  await app.register(fastifyRateLimiting);
}
