/** What came of one attempt: the server's status, or the error it failed with. */
export type CallOutcome = { status: number; error?: undefined } | { status?: undefined; error: unknown };

// Codes of Node's sockets and of undici's errors that say the exchange failed on the way, not by the caller.
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/**
 * Whether `error` is a network failure or a timeout: a `TimeoutError`, a socket or undici error code, or
 * fetch's `TypeError('fetch failed')` wrapping one (the cause chain is followed a few links).
 */
export function isNetworkError(error: unknown): boolean {
  for (let e = error, depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    const { name, code, message } = e as { name?: unknown; code?: unknown; message?: unknown };
    if (name === 'TimeoutError') return true;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true;
    if (name === 'TypeError' && message === 'fetch failed') return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The default failure test of the throttler and of retries: network errors, timeouts, and 5xx answers except
 * `501 Not Implemented` and `505 HTTP Version Not Supported` (asking again cannot change them). `429` is not a
 * failure: with `Retry-After` it pauses the partition instead.
 */
export function defaultIsFailure(outcome: CallOutcome): boolean {
  if (outcome.status === undefined) return isNetworkError(outcome.error);
  const status = outcome.status;
  return status >= 500 && status <= 599 && status !== 501 && status !== 505;
}
