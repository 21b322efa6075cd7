/**
 * The timeouts middleware must see a request before the rate limiter does: a limiter that ran first may have
 * queued the request before it had a deadline, so its queue time would not count. That still works, so a
 * middleware that finds a request already decided by floodgate's limiter warns once instead of failing it.
 */
import { emitFloodgateWarning } from '../../warning.ts';

/** What floodgate's rate limiter marks a decided request (node) or `Context` (Hono) with. */
const kRateLimited = Symbol.for('floodgate.rateLimited');

/** True when `holder` was already decided by a rate limiter. */
export function decidedBeforeTimeouts(holder: object): boolean {
  return (holder as { [kRateLimited]?: unknown })[kRateLimited] !== undefined;
}

/** Emits the `FLOODGATE_MIDDLEWARE_ORDER` warning; returns true, for a once-flag. */
export function warnMiddlewareOrder(): true {
  emitFloodgateWarning(
    'FLOODGATE_MIDDLEWARE_ORDER',
    'floodgate: the requestTimeouts middleware ran after rateLimiting, so time spent in a rate limiter queue does ' +
      'not count against the deadline; app.use() the timeouts middleware first',
  );
  return true;
}
