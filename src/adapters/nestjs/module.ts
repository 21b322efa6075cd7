import {
  type DynamicModule,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  type OptionalFactoryDependency,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { RateLimiting } from '../../http/rate-limiting/engine.ts';
import { clientIp } from './client-ip.ts';
import { FloodgateGuard } from './guard.ts';
import { FloodgatePolicyCheck } from './policy-check.ts';
import { FLOODGATE_ENGINE, FLOODGATE_OPTIONS, type FloodgateModuleOptions } from './tokens.ts';

/** Options of {@link FloodgateModule.forRootAsync}: the options come from a factory, with injected providers. */
export interface FloodgateModuleAsyncOptions {
  /** Modules whose providers the factory injects (a Redis module, the config module). */
  imports?: ModuleMetadata['imports'];
  /** The providers `useFactory` receives, in order. */
  inject?: Array<InjectionToken | OptionalFactoryDependency>;
  /** Makes the options; may be async (a Redis client that must connect first). */
  // biome-ignore lint/suspicious/noExplicitAny: Nest's own factory signature
  useFactory: (...args: any[]) => FloodgateModuleOptions | Promise<FloodgateModuleOptions>;
}

const engineProvider: Provider = {
  provide: FLOODGATE_ENGINE,
  // Validated here: a bad option fails the application's start, naming the option.
  // Its hooks see Nest's ExecutionContext: the short form keys by the request's address through it.
  useFactory: (options: FloodgateModuleOptions) => new RateLimiting(options, clientIp),
  inject: [FLOODGATE_OPTIONS],
};

/**
 * floodgate for NestJS (Express and Fastify platforms): one rate-limiting engine for the application,
 * injectable `FloodgateGuard`. Global (the guard and the engine can be injected in every module).
 *
 * @example
 * ```ts
 * FloodgateModule.forRoot({
 *   global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
 *   policies: { login: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 5, window: '1m' }) }) },
 * });
 * // providers: [{ provide: APP_GUARD, useClass: FloodgateGuard }]
 * ```
 */
export class FloodgateModule {
  /** The module with these options. Throws at startup (a `TypeError`/`RangeError` naming it) on a bad option. */
  static forRoot(options: FloodgateModuleOptions = {}): DynamicModule {
    return {
      module: FloodgateModule,
      global: true,
      imports: [DiscoveryModule],
      providers: [
        { provide: FLOODGATE_OPTIONS, useValue: options },
        engineProvider,
        FloodgateGuard,
        FloodgatePolicyCheck,
      ],
      exports: [FLOODGATE_OPTIONS, FLOODGATE_ENGINE, FloodgateGuard],
    };
  }

  /** The module with options made by a factory (injecting, say, the app's Redis client). */
  static forRootAsync(options: FloodgateModuleAsyncOptions): DynamicModule {
    return {
      module: FloodgateModule,
      global: true,
      imports: [DiscoveryModule, ...(options.imports ?? [])],
      providers: [
        { provide: FLOODGATE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] },
        engineProvider,
        FloodgateGuard,
        FloodgatePolicyCheck,
      ],
      exports: [FLOODGATE_OPTIONS, FLOODGATE_ENGINE, FloodgateGuard],
    };
  }
}

Module({})(FloodgateModule);
