import { HttpException } from '@nestjs/common';
import type { Lease } from '../../limiters/lease.ts';

/**
 * The rejection `FloodgateGuard` throws: an `HttpException` (429 by default), so the application's exception
 * filters see it. `Retry-After` and the RateLimit fields are already set on the response, and are also on
 * `headers` for a filter that builds its own answer. In a GraphQL resolver the client gets it as an error in
 * the response's `errors`, with `extensions.code` `'RATE_LIMITED'` and `extensions.retryAfter`.
 */
export class RateLimitExceededException extends HttpException {
  readonly #fields: Iterable<[string, string]>;
  #headers: Headers | undefined;

  constructor(
    /** What the default answer says (floodgate's text, or the problem+json document's fields). */
    body: string | Record<string, unknown>,
    status: number,
    /** The header fields of the rejection. */
    fields: Iterable<[string, string]>,
    /** The rejected lease (`retryAfterMs`, `reason`). */
    readonly lease: Lease,
    /** The route's policy, or undefined when the global limiter alone applies. */
    readonly policy: string | undefined,
    /**
     * In a GraphQL resolver, what the client reads on the error in the response's `errors`: `code:
     * 'RATE_LIMITED'`, `retryAfter` (seconds) and the `policy`. GraphQL copies an error's `extensions` there.
     */
    readonly extensions?: Record<string, unknown>,
  ) {
    super(typeof body === 'string' ? { statusCode: status, message: body } : body, status);
    this.#fields = fields;
  }

  /** The header fields of the rejection: `Retry-After`, `RateLimit-Policy`, `RateLimit`, `Content-Type`. */
  get headers(): Headers {
    // Made when asked for: most rejections go to the default filter, which never looks.
    if (this.#headers === undefined) {
      this.#headers = new Headers();
      for (const [name, value] of this.#fields) this.#headers.append(name, value);
    }
    return this.#headers;
  }
}
