/**
 * Nest applications over real sockets for the Nest adapter's tests, written without decorator syntax (the
 * project compiles without experimentalDecorators): Nest's decorators are applied as calls.
 */
import 'reflect-metadata';
import { Controller, Get, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';

type MethodDecorator = (target: object, key: string, descriptor: PropertyDescriptor) => unknown;

/** A controller class from handlers: `{ path: [handler, ...decorators] }`; `decorators` apply to the class. */
export function controller(
  routes: Record<string, [(request: unknown) => unknown, ...MethodDecorator[]]>,
  ...decorators: ClassDecorator[]
): Type {
  const Cls = class Routes {};
  const names: string[] = [];
  for (const [path, [handler, ...own]] of Object.entries(routes)) {
    const name = `r${names.length}_${path.replace(/\W/g, '_')}`;
    names.push(name);
    // A method's name, as a class method has: errors name the handler by it.
    Object.defineProperty(handler, 'name', { value: name });
    Object.defineProperty(Cls.prototype, name, { value: handler, writable: true, configurable: true });
    const descriptor = Object.getOwnPropertyDescriptor(Cls.prototype, name)!;
    for (const decorate of [Get(path) as MethodDecorator, ...own]) decorate(Cls.prototype, name, descriptor);
  }
  Controller()(Cls);
  for (const decorate of decorators) decorate(Cls);
  return Cls;
}

export interface Running {
  url: string;
  close(): Promise<void>;
}

export const platforms = ['express', 'fastify'] as const;
export type Platform = (typeof platforms)[number];

/** Starts a Nest application of one module on a free port, on the Express (default) or the Fastify platform. */
export async function start(platform: Platform, metadata: ModuleMetadata): Promise<Running> {
  const App = class AppModule {};
  Module(metadata)(App);
  const app =
    platform === 'fastify'
      ? await NestFactory.create(App, new FastifyAdapter(), { logger: false })
      : await NestFactory.create(App, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { url, close: () => app.close() };
}

export async function using(running: Promise<Running>, check: (r: Running) => Promise<void>): Promise<void> {
  const r = await running;
  try {
    await check(r);
  } finally {
    await r.close();
  }
}
