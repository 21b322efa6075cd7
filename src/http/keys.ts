import { describe } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import type { HttpRequest } from './request.ts';

/**
 * The one bucket that every request without a validated key shares when no `fallback` is given. It cannot
 * collide with a validated key as long as `prefix` is not empty.
 */
export const UNVALIDATED_KEY = 'floodgate:unvalidated';

/** Options of {@link validatedKey}. */
export interface ValidatedKeyOptions {
  /** Reads the candidate value: a header, an API key, a user id. `undefined` when the request has none. */
  from: (req: HttpRequest) => string | undefined;
  /**
   * Says whether the value is genuine: a known API key, a verified session's user id. Only validated values
   * become keys; anything else would let a client mint a fresh bucket per request.
   */
  validate: (value: string) => boolean;
  /** Prepended to validated values, so they never collide with IP keys or {@link UNVALIDATED_KEY}. Default `'key:'`. */
  prefix?: string;
  /** Keys requests without a validated value (e.g. `clientIp()`). Default: all of them share {@link UNVALIDATED_KEY}. */
  fallback?: (req: HttpRequest) => string;
  /** Longer values are not validated nor used: they fold like unvalidated ones. Default 256. */
  maxLength?: number;
}

/** Every option name of {@link ValidatedKeyOptions}: any other is refused. */
export const VALIDATED_KEY_OPTION_NAMES = [
  'from',
  'validate',
  'prefix',
  'fallback',
  'maxLength',
] as const satisfies readonly (keyof ValidatedKeyOptions)[];

/**
 * Keys requests by a value they carry (a header, an API key, a user id), but only when `validate` accepts it.
 * Missing, empty, overlong and unvalidated values fold into one shared bucket, or into `fallback(req)`.
 * Errors thrown by `from`, `validate` or `fallback` propagate.
 *
 * @example
 * const key = validatedKey({ from: headerValue('x-api-key'), validate: (k) => apiKeys.has(k), fallback: clientIp() });
 */
export function validatedKey(options: ValidatedKeyOptions): (req: HttpRequest) => string {
  rejectUnknown('validatedKey', options, VALIDATED_KEY_OPTION_NAMES);
  const {
    from,
    validate,
    prefix = 'key:',
    fallback,
    maxLength = 256,
  } = options ?? ({} as ValidatedKeyOptions);
  if (typeof from !== 'function') {
    throw new TypeError(`validatedKey: from must be a function; got ${describe(from)}`);
  }
  if (typeof validate !== 'function') {
    throw new TypeError(`validatedKey: validate must be a function; got ${describe(validate)}`);
  }
  if (typeof prefix !== 'string') {
    throw new TypeError(`validatedKey: prefix must be a string; got ${describe(prefix)}`);
  }
  if (fallback !== undefined && typeof fallback !== 'function') {
    throw new TypeError(`validatedKey: fallback must be a function; got ${describe(fallback)}`);
  }
  if (!Number.isInteger(maxLength) || maxLength < 1) {
    throw new RangeError(`validatedKey: maxLength must be a positive integer; got ${describe(maxLength)}`);
  }
  return (req) => {
    const value = from(req);
    // The length is checked first: validators (a database lookup, a regex) should never see a megabyte.
    if (typeof value === 'string' && value.length > 0 && value.length <= maxLength && validate(value)) {
      return prefix + value;
    }
    return fallback === undefined ? UNVALIDATED_KEY : fallback(req);
  };
}

/**
 * Reads one header for {@link validatedKey}'s `from`. A header sent on several lines gives `undefined`: a
 * client should not get to choose which of its values counts.
 */
export function headerValue(name: string): (req: HttpRequest) => string | undefined {
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError(`headerValue: name must be a header name; got ${describe(name)}`);
  }
  const lower = name.toLowerCase();
  return (req) => {
    const value = req.header(lower);
    return typeof value === 'string' ? value : undefined;
  };
}
