import type { RateLimitedError } from './errors.ts';

/** The header naming why a response was made locally (`limit`, `queue-full`, `paused`, …). */
export const LOCAL_HEADER = 'floodgate-local';

/**
 * The `429 Too Many Requests` (for a throttled call, `503 Service Unavailable`: the server is failing, no quota
 * is spent) that `onLimited: 'respond'` resolves with: it never reached the network. It carries
 * `Retry-After` in whole seconds (at least 1, so no client reads it as "now") when a time is known, and a
 * `floodgate-local` header with the reason, so code that logs responses can tell it from the server's own 429.
 */
export function localResponse(error: RateLimitedError): Response {
  const headers = new Headers({ 'content-type': 'text/plain; charset=utf-8', [LOCAL_HEADER]: error.reason });
  if (error.retryAfterMs !== undefined) {
    headers.set('retry-after', String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))));
  }
  const [status, statusText] = localStatus(error);
  return new Response(error.message, { status, statusText, headers });
}

/** The status of a local answer: 503 when throttled, else 429. */
export function localStatus(error: RateLimitedError): [number, string] {
  return error.reason === 'throttled' ? [503, 'Service Unavailable'] : [429, 'Too Many Requests'];
}
