import { HttpException } from '@nestjs/common';
import type { Lease } from '../../limiters/lease.ts';

/**
 * The rejection `FloodgateGuard` throws: an `HttpException` (429 by default), so the application's exception
 * filters see it. `Retry-After` and the RateLimit fields are already set on the response, and are also on
 * `headers` for a filter that builds its own answer.
 */
export class RateLimitExceededException extends HttpException {
  constructor(
    /** What the default answer says (floodgate's text, or the problem+json document's fields). */
    body: string | Record<string, unknown>,
    status: number,
    /** The header fields of the rejection: `Retry-After`, `RateLimit-Policy`, `RateLimit`. */
    readonly headers: Headers,
    /** The rejected lease (`retryAfterMs`, `reason`). */
    readonly lease: Lease,
    /** The route's policy, or undefined when the global limiter alone applies. */
    readonly policy: string | undefined,
  ) {
    super(typeof body === 'string' ? { statusCode: status, message: body } : body, status);
  }
}
