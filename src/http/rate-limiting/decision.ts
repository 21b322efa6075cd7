import type { KeyedResource } from '../../limiters/keyed.ts';
import { checkCost, type Lease } from '../../limiters/lease.ts';
import { policiesOf, type RateLimitInfo, type RateLimitPolicyInfo, tightest } from './info.ts';
import type { RejectingLimiter } from './options.ts';
import type { RouteLimits } from './route.ts';
import type { Result, RouteMetrics } from './route-metrics.ts';

/**
 * The outcome of one request's decision. It is also the request's {@link RateLimitInfo} (`req.rateLimit`), read
 * lazily: a handler that never looks costs no object of its own.
 */
export class Decision implements RateLimitInfo {
  /** `performance.now()` when a held lease was taken, or -1 when none is held. */
  heldSince = -1;
  #policies: readonly RateLimitPolicyInfo[] | undefined = undefined;

  constructor(
    readonly route: RouteLimits,
    /** The lease, or undefined when the route is not limited or the request was canceled. */
    readonly lease: Lease | undefined,
    readonly result: Result,
    /** The keys the request was decided with (each key function ran once), or undefined when none is partitioned. */
    readonly resource: KeyedResource | undefined = undefined,
    /** The attributes this request's metrics were recorded with (its lease's, when it is released). */
    readonly metrics: RouteMetrics = route.metrics,
  ) {}

  get granted(): boolean {
    return this.lease?.granted === true;
  }

  get policies(): readonly RateLimitPolicyInfo[] {
    this.#policies ??= policiesOf(this.route, this.resource, this.lease, this.result !== 'store_unavailable');
    return this.#policies;
  }

  get policy(): string | undefined {
    return tightest(this.policies)?.name;
  }

  get limit(): number | undefined {
    return tightest(this.policies)?.limit;
  }

  get remaining(): number | undefined {
    return tightest(this.policies)?.remaining;
  }

  get resetAfterMs(): number | undefined {
    return tightest(this.policies)?.resetAfterMs;
  }

  get key(): string | undefined {
    return tightest(this.policies)?.key;
  }

  /** The rate-limit info as plain data (what `JSON.stringify(req.rateLimit)` gives). */
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

  /** See {@link RateLimitInfo.settle}. Dry-run admitted a rejected request: nothing to settle, the cost is checked. */
  settle(actual: number): void {
    const lease = this.lease;
    if (lease === undefined || !lease.granted) {
      checkCost(actual);
      return;
    }
    lease.settle(actual);
  }

  /** Whether the response must be watched to refund this request (a granted lease and a refund rule). */
  get refundable(): boolean {
    return this.route.refund !== undefined && this.lease?.granted === true;
  }

  /** Which limiter rejected: `'global'`, `'endpoint'`, or `'store'` when the Redis store's `onUnavailable` did. */
  get limiter(): RejectingLimiter {
    if (this.result === 'store_unavailable') return 'store';
    return this.result === 'global_limiter' ? 'global' : 'endpoint';
  }
}
