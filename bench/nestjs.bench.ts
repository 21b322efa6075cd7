/**
 * Overhead of rate limiting on NestJS 11 (Express platform): bare Nest vs Nest + floodgate's guard vs Nest +
 * @nestjs/throttler's guard, both as APP_GUARD.
 *
 *   INPROC=1 npm run bench:nestjs               # CPU per request in process (no sockets): the figure in docs/nestjs.md
 *   HOT=1 INPROC=1 npm run bench:nestjs         # one hot key: nearly every request is rejected (429)
 *
 * The no-op contender is a guard that returns true: what any guard costs in Nest. Both limiters key by client
 * address with a fixed window of one minute; the limit is 10^9 (nothing is rejected) or, with HOT=1, 100.
 * @nestjs/throttler runs with its default in-memory storage, and with floodgate's drop-in FloodgateThrottlerStorage. How servers are run and compared:
 * bench/http-runner.ts (shared with bench:http).
 */
import 'reflect-metadata';
import type http from 'node:http';
import { Controller, Get, Injectable, Module, type Type } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { built, listen, runHttpBench, type Variant } from './http-runner.ts';

process.env.FRAMEWORKS ??= 'nestjs';
const HOT = process.env.HOT === '1';
const LIMIT = HOT ? 100 : 1_000_000_000;

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

async function variants(): Promise<Variant[]> {
  const { fixedWindow, partitioned } = await built<typeof import('../src/index.ts')>('index');
  const floodgate = await built<typeof import('../src/adapters/nestjs/index.ts')>('adapters/nestjs/index');
  return [
    { framework: 'nestjs', name: 'bare', start: () => nestApp([]) },
    { framework: 'nestjs', name: 'no-op guard', start: () => nestApp([], NoopGuard) },
    {
      framework: 'nestjs',
      name: 'floodgate',
      start: () =>
        nestApp(
          [
            floodgate.FloodgateModule.forRoot({
              global: partitioned({
                key: floodgate.clientIp(),
                limiter: fixedWindow({ permitLimit: LIMIT, window: '1m' }),
              }),
            }),
          ],
          floodgate.FloodgateGuard,
        ),
    },
    {
      framework: 'nestjs',
      name: '@nestjs/throttler',
      start: () => nestApp([ThrottlerModule.forRoot([{ ttl: 60_000, limit: LIMIT }])], ThrottlerGuard),
    },
    {
      framework: 'nestjs',
      name: '@nestjs/throttler on FloodgateThrottlerStorage',
      start: () =>
        nestApp(
          [
            ThrottlerModule.forRoot({
              throttlers: [{ ttl: 60_000, limit: LIMIT }],
              storage: new floodgate.FloodgateThrottlerStorage(),
            }),
          ],
          ThrottlerGuard,
        ),
    },
  ];
}

await runHttpBench({
  file: import.meta.url,
  variants,
  title: `NestJS (Express), ${HOT ? 'HOT KEY (limit 100/min, nearly all rejected)' : 'nothing rejected (limit 10^9/min)'}`,
  expectRejections: HOT,
});
