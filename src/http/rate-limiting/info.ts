import type { KeyedResource } from '../../limiters/keyed.ts';
import type { Lease } from '../../limiters/lease.ts';
import type { PolicyState } from '../ratelimit-headers.ts';
import { policyStates } from './response.ts';
import type { RouteLimits } from './route.ts';

/** One limiter in force on a request, as its `RateLimit` field item reports it. */
export interface RateLimitPolicyInfo {
  /** The policy name (`'global'`, `'login'`; `'login.2'` for a chain's second member). */
  readonly name: string;
  /** Permits per window, or concurrent permits. */
  readonly limit: number;
  /** Permits left after this request. */
  readonly remaining: number;
  /** Milliseconds until the limiter is back to full, when known. */
  readonly resetAfterMs: number | undefined;
  /** The partition key the request was decided with (as the key function returned it), for partitioned limiters. */
  readonly key: string | undefined;
}

/**
 * The rate limit of one request, for handlers and logs: `req.rateLimit` (node:http, Express),
 * `request.rateLimit` (Fastify), `c.get('rateLimit')` (Hono). The same numbers the `RateLimit` fields carry.
 * The top-level figures are the tightest limiter's (the fewest permits left); `policies` lists every one.
 * Computed when first read: a request whose handler never looks costs nothing.
 */
export interface RateLimitInfo {
  /** Whether the request was admitted (false on a rejection, also in dry-run mode). */
  readonly granted: boolean;
  /** The tightest limiter's name. */
  readonly policy: string | undefined;
  readonly limit: number | undefined;
  readonly remaining: number | undefined;
  readonly resetAfterMs: number | undefined;
  /** The tightest limiter's partition key, as given to the limiter. */
  readonly key: string | undefined;
  /** Every limiter in force, global first, in the order of the `RateLimit` field. */
  readonly policies: readonly RateLimitPolicyInfo[];
  /** Settles the request's cost now, as `lease.settle(actual)` (and throws as it does); `cost.actual` is not asked. */
  settle(actual: number): void;
}

/** Every limiter in force on a decided request (none when no limiter's state is known). */
export function policiesOf(
  route: RouteLimits,
  resource: KeyedResource | undefined,
  lease: Lease | undefined,
  known: boolean,
): readonly RateLimitPolicyInfo[] {
  return lease === undefined || !known ? [] : policyStates(route, resource, lease).map(toInfo);
}

/** The limiter with the fewest permits left. */
export function tightest(policies: readonly RateLimitPolicyInfo[]): RateLimitPolicyInfo | undefined {
  let found: RateLimitPolicyInfo | undefined;
  for (const policy of policies)
    if (found === undefined || policy.remaining < found.remaining) found = policy;
  return found;
}

function toInfo(state: PolicyState): RateLimitPolicyInfo {
  return {
    name: state.name,
    limit: state.limit,
    remaining: Math.max(0, Math.floor(state.remaining)),
    resetAfterMs: state.resetAfterMs,
    key: state.partitionKey,
  };
}
