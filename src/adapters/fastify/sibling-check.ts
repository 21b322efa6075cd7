import type { FastifyInstance } from 'fastify';

/**
 * floodgate's two Fastify plugins each read one route option (`config.timeout`, `config.rateLimiting`); a
 * route that sets the other plugin's option while that plugin is missing would be silently unprotected. Each
 * plugin notes such routes as it sees them and fails `ready()` (when every plugin is registered) if the other
 * plugin is still absent from the route's context. Returns the function that notes a route.
 */
export function checkSiblingAtReady(
  fastify: FastifyInstance,
  option: string,
  plugin: { name: string; factory: string; without: string },
): (instance: FastifyInstance, where: string) => void {
  const seen: Array<{ instance: FastifyInstance; where: string }> = [];
  fastify.addHook('onReady', (ready) => {
    const missing = seen.find(({ instance }) => !instance.hasPlugin(plugin.name));
    seen.length = 0;
    ready(
      missing &&
        new Error(
          `floodgate: ${missing.where} sets config.${option} but the ${plugin.factory} plugin is not registered; ` +
            `register it (floodgate/fastify) or ${plugin.without}`,
        ),
    );
  });
  return (instance, where) => {
    seen.push({ instance, where });
  };
}
