/**
 * The NestJS 11 (Express platform) contenders shared by bench:nestjs and bench:http: bare Nest, a guard that
 * returns true, a guard that sets the two draft-10 fields as constants, floodgate's guard, @nestjs/throttler's
 * guard (default storage, and on FloodgateThrottlerStorage), every guard as APP_GUARD, every limiter keyed by
 * client address with a fixed window of one minute.
 */
import 'reflect-metadata';
import type http from 'node:http';
import { Controller, type ExecutionContext, Get, Injectable, Module, type Type } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { built, listen, type Variant } from './http-runner.ts';

const POLICY = '"global";q=1000000000;w=60;pk=:FMmnE8mMBfgjUa2D:';
const LIMIT_FIELD = '"global";r=999999999;t=60;pk=:FMmnE8mMBfgjUa2D:';

// Nest's decorators as calls: the project compiles without experimentalDecorators.
class Api {
  home(): string {
    return 'ok';
  }
}
Controller()(Api);
Get()(Api.prototype, 'home', Object.getOwnPropertyDescriptor(Api.prototype, 'home')!);

class NoopGuard {
  canActivate(): boolean {
    return true;
  }
}
Injectable()(NoopGuard);

class FieldsGuard {
  canActivate(context: ExecutionContext): boolean {
    const res = context.switchToHttp().getResponse<http.ServerResponse>();
    res.setHeader('RateLimit-Policy', POLICY);
    res.setHeader('RateLimit', LIMIT_FIELD);
    return true;
  }
}
Injectable()(FieldsGuard);

async function nestApp(imports: unknown[], guard?: Type): Promise<http.Server> {
  const App = class AppModule {};
  Module({
    imports: imports as never[],
    controllers: [Api],
    providers: guard === undefined ? [] : [{ provide: APP_GUARD, useClass: guard }],
  })(App);
  const app = await NestFactory.create(App, { logger: false });
  await app.init();
  return listen(app.getHttpServer() as http.Server);
}

/**
 * The Nest contenders, every limiter at `limit` requests a minute; `storage` adds @nestjs/throttler on
 * floodgate's drop-in FloodgateThrottlerStorage.
 */
export async function nestVariants(limit: number, { storage = false } = {}): Promise<Variant[]> {
  const { fixedWindow, partitioned } = await built<typeof import('../src/index.ts')>('index');
  const floodgate = await built<typeof import('../src/adapters/nestjs/index.ts')>('adapters/nestjs/index');
  const variants: Variant[] = [
    { framework: 'nestjs', name: 'bare', start: () => nestApp([]) },
    { framework: 'nestjs', name: 'no-op guard', start: () => nestApp([], NoopGuard) },
    { framework: 'nestjs', name: 'two fields, no limiter', start: () => nestApp([], FieldsGuard) },
    {
      framework: 'nestjs',
      name: 'floodgate',
      start: () =>
        nestApp(
          [
            floodgate.FloodgateModule.forRoot({
              global: partitioned({
                key: floodgate.clientIp(),
                limiter: fixedWindow({ permitLimit: limit, window: '1m' }),
              }),
            }),
          ],
          floodgate.FloodgateGuard,
        ),
    },
    {
      framework: 'nestjs',
      name: '@nestjs/throttler',
      start: () => nestApp([ThrottlerModule.forRoot([{ ttl: 60_000, limit }])], ThrottlerGuard),
    },
  ];
  if (storage) {
    variants.push({
      framework: 'nestjs',
      name: '@nestjs/throttler on FloodgateThrottlerStorage',
      start: () =>
        nestApp(
          [
            ThrottlerModule.forRoot({
              throttlers: [{ ttl: 60_000, limit }],
              storage: new floodgate.FloodgateThrottlerStorage(),
            }),
          ],
          ThrottlerGuard,
        ),
    });
  }
  return variants;
}
