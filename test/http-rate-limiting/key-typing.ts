// Type tests, compiled by `npm run typecheck` (never run): a partitioned limiter's key function written inline in
// an adapter's options receives that framework's request, typed, not `any`. Each `@ts-expect-error` below compiles
// silently when the parameter is `any`, so tsc fails on the unused directive if the typing regresses.
import type { IncomingMessage } from 'node:http';
import type { Redis } from 'ioredis';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as honoRateLimiting } from '../../src/adapters/hono/rate-limiting.ts';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/rate-limiting.ts';
import { FloodgateModule } from '../../src/adapters/nestjs/index.ts';
import { rateLimiting as nodeRateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import { fixedWindow, partitioned } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';

const perMinute = fixedWindow({ permitLimit: 100, window: '1m' });

export function express(): void {
  expressRateLimiting({
    // @ts-expect-error Express's Request has no such property
    global: partitioned({ key: (req) => req.doesNotExist.foo(), limiter: perMinute }),
    policies: {
      // @ts-expect-error a key is a string
      plain: partitioned({ key: (req) => req.ip?.length ?? 0, limiter: perMinute }),
      // @ts-expect-error in a policy with options too
      withOptions: { limiter: partitioned({ key: (req) => req.doesNotExist.foo(), limiter: perMinute }) },
      typed: partitioned({ key: (req) => req.ip ?? req.socket.remoteAddress ?? '', limiter: perMinute }),
    },
  });
}

export function shortForm(): void {
  // @ts-expect-error the short form's key receives Express's Request too
  expressRateLimiting({ limit: 100, window: '1m', key: (req) => req.doesNotExist.foo() });
  // @ts-expect-error and Hono's Context
  honoRateLimiting({ limit: 100, window: '1m', key: (c) => c.doesNotExist.foo() });
  // @ts-expect-error and Nest's ExecutionContext
  FloodgateModule.forRoot({ limit: 100, window: '1m', key: (context) => context.doesNotExist.foo() });
  expressRateLimiting({ limit: 100, window: '1m', key: (req) => req.ip ?? 'unknown' });
}

export async function fastify(app: import('fastify').FastifyInstance): Promise<void> {
  await app.register(fastifyRateLimiting, {
    // @ts-expect-error FastifyRequest has no such property
    global: partitioned({ key: (request) => request.doesNotExist.foo(), limiter: perMinute }),
  });
  await app.register(fastifyRateLimiting, {
    global: partitioned({ key: (request) => request.ip, limiter: perMinute }),
  });
}

export function hono(): void {
  honoRateLimiting({
    // @ts-expect-error Hono's Context has no such property
    global: partitioned({ key: (c) => c.doesNotExist.foo(), limiter: perMinute }),
  });
  honoRateLimiting<{ Variables: { user: { id: string } } }>({
    // @ts-expect-error the app's variables are typed: a user has no name
    global: partitioned({ key: (c) => c.get('user').name, limiter: perMinute }),
  });
  honoRateLimiting({ global: partitioned({ key: (c) => c.req.header('x-user') ?? '', limiter: perMinute }) });
}

export function koa(): void {
  // Koa's own Context has an index signature (`ctx.anything` is `any` by Koa's design), so the checks are on what
  // Koa does type: its request, the app's state, the key's type.
  koaRateLimiting({
    // @ts-expect-error Koa's Request has no such property
    global: partitioned({ key: (ctx) => ctx.request.doesNotExist.foo(), limiter: perMinute }),
  });
  koaRateLimiting<{ user?: { id: string } }>({
    // @ts-expect-error the app's state is typed: a user has no name
    global: partitioned({ key: (ctx) => ctx.state.user?.name ?? '', limiter: perMinute }),
  });
  koaRateLimiting({
    // @ts-expect-error a key is a string
    global: partitioned({ key: (ctx) => ctx.ip.length, limiter: perMinute }),
  });
}

export function nest(): void {
  FloodgateModule.forRoot({
    // @ts-expect-error Nest's ExecutionContext has no such property
    global: partitioned({ key: (context) => context.doesNotExist.foo(), limiter: perMinute }),
  });
  FloodgateModule.forRootAsync({
    useFactory: () => ({
      // @ts-expect-error in the factory's options too
      global: partitioned({ key: (context) => context.doesNotExist.foo(), limiter: perMinute }),
    }),
  });
  FloodgateModule.forRoot({
    global: partitioned({
      key: (context) => context.switchToHttp().getRequest<{ ip: string }>().ip,
      limiter: perMinute,
    }),
  });
}

interface Authed extends IncomingMessage {
  user?: { id: string };
}

export function node(): void {
  nodeRateLimiting({
    // @ts-expect-error IncomingMessage has no such property
    global: partitioned({ key: (req) => req.doesNotExist.foo(), limiter: perMinute }),
  });
  nodeRateLimiting<Authed>({
    // @ts-expect-error the app's request type: a user has no name
    global: partitioned({ key: (req) => req.user?.name ?? '', limiter: perMinute }),
  });
}

export function redis(client: Redis): void {
  const store = redisStore({ client });
  expressRateLimiting({
    // @ts-expect-error store.partitioned's key receives Express's Request too
    global: store.partitioned({ name: 'api', key: (req) => req.doesNotExist.foo(), limiter: perMinute }),
  });
  honoRateLimiting({
    // @ts-expect-error and Hono's Context
    global: store.partitioned({ name: 'api', key: (c) => c.doesNotExist.foo(), limiter: perMinute }),
  });
  expressRateLimiting({
    global: store.partitioned({ name: 'api', key: (req) => req.ip ?? '', limiter: perMinute }),
  });
}
