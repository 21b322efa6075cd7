/**
 * The two reasons a request's signal aborts. Both are `DOMException`s, as `AbortSignal.timeout()` and `fetch`
 * use, so code downstream (`fetch`, `timers/promises`, undici) rethrows them unchanged and a handler can tell
 * them apart by `name`.
 */

/** The abort reason at the deadline: a `DOMException` named `'TimeoutError'`. */
export function timeoutReason(policy: string, ms: number): DOMException {
  return new DOMException(`Request timed out after ${ms} ms (policy "${policy}")`, 'TimeoutError');
}

/** The abort reason when the client goes away first: a `DOMException` named `'AbortError'`. */
export function disconnectReason(): DOMException {
  return new DOMException('The client disconnected before the response was complete', 'AbortError');
}

/** True when `reason` is the abort reason of a request timeout (or any `TimeoutError`). */
export function isTimeoutReason(reason: unknown): boolean {
  return (reason as { name?: unknown } | null)?.name === 'TimeoutError';
}

/** True for the errors a handler typically rethrows after its signal aborted. */
export function isAbortReason(reason: unknown): boolean {
  const name = (reason as { name?: unknown } | null)?.name;
  return name === 'TimeoutError' || name === 'AbortError';
}
