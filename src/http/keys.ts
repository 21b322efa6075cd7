import { describe } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import { type RequestLike, singleHeader } from './request.ts';

/**
 * The one bucket that every request without a validated key shares when no `fallback` is given. It cannot
 * collide with a validated key as long as `prefix` is not empty.
 */
export const UNVALIDATED_KEY = 'floodgate:unvalidated';

/** A value, or a promise of it: hooks may look things up (a database, a session store) and are awaited. */
export type MaybePromise<T> = T | PromiseLike<T>;

/**
 * Options of {@link validatedKey}. `Req` is what the adapter passes: node's `IncomingMessage`, Express's
 * `Request`, Fastify's `FastifyRequest`, Hono's `Context`.
 */
export interface ValidatedKeyOptions<Req = RequestLike> {
  /** Reads the candidate value: a header, an API key, a user id. `undefined` when the request has none. May be async. */
  from: (req: Req) => MaybePromise<string | undefined>;
  /**
   * Says whether the value is genuine: a known API key, a verified session's user id. Only validated values
   * become keys; anything else would let a client mint a fresh bucket per request. May be async (awaited).
   */
  validate: (value: string) => MaybePromise<boolean>;
  /** Prepended to validated values, so they never collide with IP keys or {@link UNVALIDATED_KEY}. Default `'key:'`. */
  prefix?: string;
  /** Keys requests without a validated value (e.g. `clientIp()`). Default: all of them share {@link UNVALIDATED_KEY}. */
  fallback?: (req: Req) => MaybePromise<string>;
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
 * Errors thrown by `from`, `validate` or `fallback` propagate (the request fails; nothing is charged). When
 * every function answers synchronously the key is a string; when one returns a promise the key is a promise,
 * which `rateLimiting` awaits.
 *
 * @example
 * const key = validatedKey({ from: headerValue('x-api-key'), validate: (k) => apiKeys.has(k), fallback: clientIp() });
 */
export function validatedKey<Req = RequestLike>(
  options: ValidatedKeyOptions<Req>,
): (req: Req) => MaybePromise<string> {
  rejectUnknown('validatedKey', options, VALIDATED_KEY_OPTION_NAMES);
  const {
    from,
    validate,
    prefix = 'key:',
    fallback,
    maxLength = 256,
  } = options ?? ({} as ValidatedKeyOptions<Req>);
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
  const otherwise = (req: Req): MaybePromise<string> =>
    fallback === undefined ? UNVALIDATED_KEY : fallback(req);
  const judge = (req: Req, value: string | undefined): MaybePromise<string> => {
    // The length is checked first: validators (a database lookup, a regex) should never see a megabyte.
    if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) return otherwise(req);
    const verdict = validate(value);
    if (isThenable(verdict)) {
      return Promise.resolve(verdict).then((ok) => (ok ? prefix + value : otherwise(req)));
    }
    return verdict ? prefix + value : otherwise(req);
  };
  return (req) => {
    const value = from(req);
    if (isThenable(value)) return Promise.resolve(value).then((v) => judge(req, v));
    return judge(req, value);
  };
}

/**
 * Reads one header for {@link validatedKey}'s `from`, on any adapter's request. A header sent on several
 * lines gives `undefined`: a client should not get to choose which of its values counts. (Off Node, a web
 * `Request` joins repeated lines before floodgate sees them.)
 */
export function headerValue(name: string): (req: RequestLike) => string | undefined {
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError(`headerValue: name must be a header name; got ${describe(name)}`);
  }
  const lower = name.toLowerCase();
  return (req) => singleHeader(req, lower);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
