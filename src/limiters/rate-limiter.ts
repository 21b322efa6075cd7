import type { Algorithm } from '../algorithms/algorithm.ts';
import { type CoreOptions, LimiterCore } from './core.ts';
import type { Lease } from './lease.ts';
import { checkPermits } from './options.ts';
import { MEMORY, type MemoryStore } from './store.ts';

/** What a limiter reports about itself. */
export interface Statistics {
  /** Permits available now. */
  available: number;
  /** Permits waiting in the queue. */
  queued: number;
  /** Requests granted so far (zero-permit probes excluded). */
  granted: number;
  /** Requests rejected so far, each counted once (probes and cancellations excluded). */
  rejected: number;
}

/** Options of {@link RateLimiter.acquire}. */
export interface AcquireOptions {
  /** Aborting it removes a waiting request from the queue at once; its promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * A limiter's algorithm and queue settings: what a partitioned limiter builds one state per key from. Two specs
 * with equal `signature`s decide alike and share storage.
 */
export interface LimiterSpec {
  readonly algorithm: Algorithm;
  readonly options: CoreOptions;
  readonly signature: string;
  /** @internal Builds the decision engine a partitioned limiter keeps for this spec (default: a `LimiterCore`). */
  createCore?(): LimiterCore;
}

/**
 * A limiter with one state, in memory. Use the factories (`fixedWindow`, `slidingWindow`, `tokenBucket`,
 * `concurrency`); every limiter is also a {@link LimiterSpec} for `partitioned`.
 */
export abstract class RateLimiter implements LimiterSpec {
  readonly signature: string;
  /** @internal */
  readonly core: LimiterCore;

  protected constructor(
    readonly algorithm: Algorithm,
    readonly options: CoreOptions,
    core: LimiterCore = new LimiterCore(algorithm, options),
  ) {
    this.signature = `${algorithm.signature}|q${options.queueLimit}:${options.queueOrder}:${options.countRejected ? 1 : 0}`;
    this.core = core;
    this.core.source = this;
    this.core.allocate(options.clock.now());
  }

  /** The most permits one request may ask for. */
  get limit(): number {
    return this.algorithm.limit;
  }

  /** The store that decides it: this process's memory (decided synchronously). */
  get store(): MemoryStore {
    return MEMORY;
  }

  /** Decides now and never waits. `permits = 0` probes: granted when a permit is available, consuming nothing. */
  tryAcquire(permits = 1): Lease {
    if (permits !== 1) checkPermits(permits, this.algorithm.limit);
    return this.core.tryAcquire(0, permits, this.options.clock.now());
  }

  /**
   * Grants now if it can; otherwise waits in the queue while `queueLimit` leaves room; otherwise resolves at once
   * with a rejected lease (`'limit'`, or `'queue-full'` when there is a queue). Charged once, when admitted.
   */
  acquire(permits = 1, options?: AcquireOptions): Promise<Lease> {
    try {
      checkPermits(permits, this.algorithm.limit);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.core.acquire(0, permits, options?.signal);
  }

  /** Permits available and queued now, and the totals granted and rejected. */
  statistics(): Statistics {
    const { available, queued } = this.core.peek(0, this.options.clock.now());
    return { available, queued, granted: this.core.granted, rejected: this.core.rejected };
  }
}
