/**
 * Hono's `app.route(path, sub)` wraps each handler of a sub-app that has its own `onError` in a function that
 * composes the handler with that error handler, keeping the original under `__COMPOSED_HANDLER` (once per level
 * of nesting). Markers (rate limiting, timeouts) are found on a matched handler through those wrappers.
 */
const COMPOSED_HANDLER = '__COMPOSED_HANDLER';
const MAX_DEPTH = 8;

/** The first value `read` finds on `handler` or the handlers it wraps, or undefined. */
export function throughComposed<T>(
  handler: unknown,
  read: (handler: object) => T | undefined,
): T | undefined {
  let h = handler as Record<string, unknown> | null | undefined;
  for (let depth = 0; h != null && depth < MAX_DEPTH; depth++) {
    const found = read(h);
    if (found !== undefined) return found;
    h = h[COMPOSED_HANDLER] as typeof h;
  }
  return undefined;
}
