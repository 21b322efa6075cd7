import type { PolicyState } from '../ratelimit-headers.ts';
import type { Decision } from './engine.ts';
import { policyStates } from './response.ts';

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
 * Read lazily: a request whose handler never looks costs one small object.
 */
export class RateLimitInfo {
  #decision: Decision;
  #policies: readonly RateLimitPolicyInfo[] | undefined;

  /** @internal Made by the adapters. */
  constructor(decision: Decision) {
    this.#decision = decision;
  }

  /** Whether the request was admitted (false on a rejection, also in dry-run mode). */
  get granted(): boolean {
    return this.#decision.lease?.granted === true;
  }

  /** Every limiter in force, global first, in the order of the `RateLimit` field. */
  get policies(): readonly RateLimitPolicyInfo[] {
    if (this.#policies === undefined) {
      const { route, resource, lease } = this.#decision;
      this.#policies =
        lease === undefined || this.#decision.result === 'store_unavailable'
          ? []
          : policyStates(route, resource, lease).map(toInfo);
    }
    return this.#policies;
  }

  /** The tightest limiter: the one with the fewest permits left. */
  #tightest(): RateLimitPolicyInfo | undefined {
    let tightest: RateLimitPolicyInfo | undefined;
    for (const policy of this.policies)
      if (tightest === undefined || policy.remaining < tightest.remaining) tightest = policy;
    return tightest;
  }

  /** The tightest limiter's name. */
  get policy(): string | undefined {
    return this.#tightest()?.name;
  }

  get limit(): number | undefined {
    return this.#tightest()?.limit;
  }

  get remaining(): number | undefined {
    return this.#tightest()?.remaining;
  }

  get resetAfterMs(): number | undefined {
    return this.#tightest()?.resetAfterMs;
  }

  /** The tightest limiter's partition key, as given to the limiter. */
  get key(): string | undefined {
    return this.#tightest()?.key;
  }

  toJSON(): object {
    return {
      granted: this.granted,
      policy: this.policy,
      limit: this.limit,
      remaining: this.remaining,
      resetAfterMs: this.resetAfterMs,
      key: this.key,
      policies: this.policies,
    };
  }
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
