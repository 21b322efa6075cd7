import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { FloodgateGuard } from './guard.ts';
import { forEachHandler } from './handlers.ts';

/**
 * Checks every controller's `@RateLimit()` settings when the application starts, so that a policy name that does
 * not exist (or a bad inline policy) fails `app.init()` with a RangeError naming the handler, not its first
 * request.
 */
export class FloodgatePolicyCheck implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly guard: FloodgateGuard,
  ) {}

  onModuleInit(): void {
    forEachHandler(this.discovery, this.scanner, (controller, handler) =>
      this.guard.routeOf(controller, handler),
    );
  }
}

Injectable()(FloodgatePolicyCheck);
Inject(DiscoveryService)(FloodgatePolicyCheck, undefined as never, 0);
Inject(MetadataScanner)(FloodgatePolicyCheck, undefined as never, 1);
Inject(FloodgateGuard)(FloodgatePolicyCheck, undefined as never, 2);
