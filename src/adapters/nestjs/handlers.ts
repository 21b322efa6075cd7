import type { DiscoveryService, MetadataScanner } from '@nestjs/core';

/**
 * Calls `visit(controller, handler)` for every method of every controller of the application: how the module
 * checks decorator settings at startup, so a typo fails `app.init()` rather than a first request.
 */
export function forEachHandler(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  visit: (controller: object, handler: object) => void,
): void {
  for (const wrapper of discovery.getControllers()) {
    const controller = wrapper.metatype as (abstract new (...args: never[]) => unknown) | null;
    if (typeof controller !== 'function') continue;
    const prototype = controller.prototype as Record<string, unknown>;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const handler = prototype[name];
      if (typeof handler === 'function') visit(controller, handler);
    }
  }
}
