import { type Duration, describe, parseDuration } from '../../duration.ts';
import { fixedWindow } from '../../limiters/fixed-window.ts';
import type { Limiter } from '../../limiters/limiter.ts';
import { partitioned } from '../../limiters/partitioned.ts';
import { clientIp } from '../client-ip.ts';
import { warnOnce } from '../warnings.ts';

/**
 * The short form of `rateLimiting()`: `limit` requests per `window` for each client, the commonest limit and
 * every peer's default (express-rate-limit's `windowMs`/`limit`).
 */
export interface PerClientOptions<Req = unknown> {
  /**
   * Requests each client may make per `window`: the global limiter becomes `partitioned({ key, limiter:
   * fixedWindow({ permitLimit: limit, window }) })`, a fixed window per client (the algorithm of
   * express-rate-limit, @fastify/rate-limit and hono-rate-limiter). Give `global` instead for another algorithm
   * or a limit not per client. Route policies chain with it as with any global limiter.
   */
  limit?: number;
  /** The window of `limit`: milliseconds or `'30s'`, `'1m'`, `'1h'`. Required with `limit`. */
  window?: Duration;
  /**
   * Who a client is, for `limit`: a function of the framework's request. Default `clientIp()`, the socket peer's
   * address, or the address the framework's own trust setting gives (Express `trust proxy`, Fastify
   * `trustProxy`, Koa `app.proxy`). Behind a proxy on node:http or Hono: `key: clientIp({ trustedHops: 1 })`.
   */
  key?: (req: Req) => string | PromiseLike<string>;
  /**
   * `true` says that a `global` limiter which is not partitioned is meant to be one budget for the whole server,
   * which silences the `FLOODGATE_GLOBAL_NOT_PARTITIONED` warning. Default false.
   */
  shared?: boolean;
}

/**
 * Makes the short form's default key: `clientIp` of `floodgate/http`, or an adapter's own where its hooks see
 * another object (Nest's `ExecutionContext`).
 */
// biome-ignore lint/suspicious/noExplicitAny: each adapter's key takes its own request
export type ClientKey = () => (req: any) => string;

/** The names {@link PerClientOptions} adds to `rateLimiting()`'s options. */
export const PER_CLIENT_OPTION_NAMES = ['limit', 'window', 'key', 'shared'] as const;

/**
 * The global limiter the short form asks for, or `undefined` when it is not used; throws a `TypeError` or
 * `RangeError` naming the option when the short form is incomplete or mixed with `global`/`shared`.
 */
export function perClientLimiter(
  options: PerClientOptions & { global?: unknown },
  clientKey: ClientKey = clientIp,
): Limiter | undefined {
  const { limit, window, key, shared, global } = options;
  if (shared !== undefined && typeof shared !== 'boolean') {
    throw new TypeError(`rateLimiting: shared must be a boolean; got ${describe(shared)}`);
  }
  if (limit === undefined && window === undefined) {
    if (key !== undefined) {
      throw new TypeError(
        'rateLimiting: key goes with limit and window (the short form); with global, give the key to partitioned({ key, limiter })',
      );
    }
    return undefined;
  }
  if (global !== undefined) {
    throw new TypeError(
      'rateLimiting: give limit and window (one limit per client) or global (a limiter of your own), not both',
    );
  }
  if (shared === true) {
    throw new TypeError(
      'rateLimiting: shared: true says global is one budget for everyone; limit is per client',
    );
  }
  if (limit === undefined || window === undefined) {
    throw new TypeError(
      `rateLimiting: limit and window go together (e.g. { limit: 100, window: '1m' }); got ${limit === undefined ? 'window' : 'limit'} alone`,
    );
  }
  if (!Number.isInteger(limit) || limit < 1) {
    throw new RangeError(`rateLimiting: limit must be a positive integer; got ${describe(limit)}`);
  }
  parseDuration('rateLimiting: window', window);
  if (key !== undefined && typeof key !== 'function') {
    throw new TypeError(`rateLimiting: key must be a function (req) => string; got ${describe(key)}`);
  }
  return partitioned({ key: key ?? clientKey(), limiter: fixedWindow({ permitLimit: limit, window }) });
}

/**
 * Warns once per process when the global limiter is one bucket for every client: time-based and not
 * partitioned (a concurrency limit is server-wide by design), unless `shared: true` says that is the intent.
 */
export function checkGlobal(members: readonly Limiter[], shared: boolean | undefined): void {
  if (shared === true) return;
  if (members.some((m) => m.keyOf !== undefined)) return;
  if (!members.some((m) => m.shape?.timeBased === true)) return;
  warnOnce(
    'FLOODGATE_GLOBAL_NOT_PARTITIONED',
    'floodgate: the global limiter is not partitioned, so it is one budget for the whole server: a few clients ' +
      "can use it up for everyone. For a limit per client address: rateLimiting({ limit: 100, window: '1m' }), " +
      'or global: partitioned({ key: clientIp(), limiter }). If one budget for everyone is what you mean, pass ' +
      'rateLimiting({ global, shared: true }).',
  );
}
