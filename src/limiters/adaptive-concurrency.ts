import { AdaptiveConcurrency } from '../algorithms/adaptive-concurrency.ts';
import { telemetry } from '../telemetry.ts';
import { AdaptiveCore } from './adaptive-core.ts';
import {
  type AdaptiveConcurrencyOptions,
  type ResolvedAdaptive,
  resolveAdaptive,
} from './adaptive-options.ts';
import type { LimiterCore } from './core.ts';
import type { Lease } from './lease.ts';
import type { Priority } from './priority.ts';
import { type AcquireOptions, RateLimiter, type Statistics } from './rate-limiter.ts';

/** Options of {@link AdaptiveConcurrencyLimiter.acquire}. */
export interface AdaptiveAcquireOptions extends AcquireOptions {
  /** The request's class. Default `'default'`. Under contention lower classes are shed first. */
  priority?: Priority;
}

/** What an adaptive concurrency limiter reports: a concurrency limiter's statistics and its current limit. */
export interface AdaptiveStatistics extends Statistics {
  /** The limit in force now (what is learnt). */
  limit: number;
  /** Permits held now (may exceed `limit` right after it was lowered: see the class). */
  inFlight: number;
}

let instances = 0;
// The gauge's attributes for partitions: one series for all of them, whatever the keys.
const PARTITIONED = { partitioned: true };

/**
 * A concurrency limiter that finds its own limit from the round-trip time of its leases (grant to release) and
 * their outcomes (`release()`, `release({ dropped: true })`, `release({ ignore: true })`). Same interface as
 * `concurrency()`; usable alone, in `partitioned` (one learnt limit per key) and `chain`, and as an HTTP policy.
 *
 * A grant happens only while `held + permits ≤ limit` (the class's share of it, with `classes.reserve`). When the
 * limit is lowered, leases already granted are not taken back: in-flight may exceed the current limit until they
 * are released, and nothing is granted until it is back under.
 */
export class AdaptiveConcurrencyLimiter extends RateLimiter {
  declare readonly algorithm: AdaptiveConcurrency;
  /** @internal */
  declare readonly core: AdaptiveCore;
  readonly #resolved: ResolvedAdaptive;

  constructor(options?: AdaptiveConcurrencyOptions) {
    const resolved = resolveAdaptive(options);
    const algorithm = new AdaptiveConcurrency(
      resolved.initialLimit,
      resolved.maxLimit,
      `ac#${++instances}:${resolved.describe}`,
    );
    const core = new AdaptiveCore(algorithm, resolved.core, resolved.settings);
    core.gauge = true;
    super(algorithm, resolved.core, core);
    this.#resolved = resolved;
  }

  /** The limit in force now. */
  get currentLimit(): number {
    return this.core.limitOf(0);
  }

  /** Decides now and never waits; `priority` is the request's class. */
  override tryAcquire(permits = 1, priority?: Priority): Lease {
    return this.tryAcquireFor(undefined, permits, true, priority);
  }

  /**
   * Grants now if it can; otherwise waits in its class's queue (bounded by `queueLimit` and by queue delay);
   * otherwise resolves with a rejected lease (`'limit'`, `'queue-full'`, `'evicted'` by a higher class,
   * `'queue-delay'`, `'event-loop'` under the brake).
   */
  override acquire(permits = 1, options?: AdaptiveAcquireOptions): Promise<Lease> {
    return this.acquireFor(undefined, permits, options?.signal, options?.priority);
  }

  override statistics(): AdaptiveStatistics {
    const { available, queued } = this.core.peek(0, 0);
    return {
      available,
      queued,
      granted: this.core.granted,
      rejected: this.core.rejected,
      limit: this.core.limitOf(0),
      inFlight: this.core.heldOf(0),
    };
  }

  /** @internal Each partition of a partitioned limiter learns its own limit. */
  createCore(): LimiterCore {
    // A limiter given to `partitioned` is a template: its own limit, never used, leaves the plain series.
    if (this.core.gauge && this.core.granted === 0 && this.core.rejected === 0) {
      this.core.gauge = false;
      telemetry().concurrencyLimit.add(-this.core.limitOf(0), this.core.gaugeAttributes);
    }
    const core = new AdaptiveCore(this.algorithm, this.#resolved.core, this.#resolved.settings);
    core.gauge = true;
    core.gaugeAttributes = PARTITIONED;
    return core;
  }
}

/** An adaptive concurrency limiter. See {@link AdaptiveConcurrencyLimiter}. */
export function adaptiveConcurrency(options?: AdaptiveConcurrencyOptions): AdaptiveConcurrencyLimiter {
  return new AdaptiveConcurrencyLimiter(options);
}
