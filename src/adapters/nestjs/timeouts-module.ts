import {
  type DynamicModule,
  Inject,
  Injectable,
  Module,
  type OnModuleInit,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { RequestTimeouts } from '../../http/timeouts/engine.ts';
import type { RequestTimeoutsOptions } from '../../http/timeouts/options.ts';
import { forEachHandler } from './handlers.ts';
import type { FloodgateModuleAsyncOptions } from './module.ts';
import { FloodgateTimeoutInterceptor } from './timeout-interceptor.ts';
import { FLOODGATE_TIMEOUTS_ENGINE, FLOODGATE_TIMEOUTS_OPTIONS } from './tokens.ts';

/** Options of {@link FloodgateTimeoutsModule.forRootAsync}: the options come from a factory. */
export type FloodgateTimeoutsAsyncOptions = Omit<FloodgateModuleAsyncOptions, 'useFactory'> & {
  // biome-ignore lint/suspicious/noExplicitAny: Nest's own factory signature
  useFactory: (...args: any[]) => RequestTimeoutsOptions | Promise<RequestTimeoutsOptions>;
};

const engineProvider: Provider = {
  provide: FLOODGATE_TIMEOUTS_ENGINE,
  // Validated here: a bad option fails the application's start, naming the option.
  useFactory: (options: RequestTimeoutsOptions) => new RequestTimeouts(options),
  inject: [FLOODGATE_TIMEOUTS_OPTIONS],
};

/** Checks every controller's `@Timeout()` settings when the application starts (a typo fails `app.init()`). */
class TimeoutSettingsCheck implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly interceptor: FloodgateTimeoutInterceptor,
  ) {}

  onModuleInit(): void {
    forEachHandler(this.discovery, this.scanner, (controller, handler) =>
      this.interceptor.settingOf(controller, handler),
    );
  }
}
Injectable()(TimeoutSettingsCheck);
Inject(DiscoveryService)(TimeoutSettingsCheck, undefined as never, 0);
Inject(MetadataScanner)(TimeoutSettingsCheck, undefined as never, 1);
Inject(FloodgateTimeoutInterceptor)(TimeoutSettingsCheck, undefined as never, 2);

function moduleWith(optionsProvider: Provider, imports: DynamicModule['imports'] = []): DynamicModule {
  return {
    module: FloodgateTimeoutsModule,
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers: [optionsProvider, engineProvider, FloodgateTimeoutInterceptor, TimeoutSettingsCheck],
    exports: [FLOODGATE_TIMEOUTS_ENGINE, FloodgateTimeoutInterceptor],
  };
}

/**
 * Request timeouts for NestJS (Express and Fastify platforms): the options of every floodgate adapter's
 * `requestTimeouts()` (`default`, `policies`, `onTimeout`, `onOverrun`), and `FloodgateTimeoutInterceptor` to
 * register as `APP_INTERCEPTOR`. Global.
 *
 * @example
 * ```ts
 * FloodgateTimeoutsModule.forRoot({ default: '5s', policies: { reports: '30s' } });
 * // providers: [{ provide: APP_INTERCEPTOR, useClass: FloodgateTimeoutInterceptor }]
 * ```
 */
export class FloodgateTimeoutsModule {
  /** The module with these options. Throws at startup (a `TypeError`/`RangeError` naming it) on a bad option. */
  static forRoot(options: RequestTimeoutsOptions = {}): DynamicModule {
    return moduleWith({ provide: FLOODGATE_TIMEOUTS_OPTIONS, useValue: options });
  }

  /** The module with options made by a factory (from the app's configuration, say). */
  static forRootAsync(options: FloodgateTimeoutsAsyncOptions): DynamicModule {
    return moduleWith(
      { provide: FLOODGATE_TIMEOUTS_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] },
      options.imports,
    );
  }
}

Module({})(FloodgateTimeoutsModule);
