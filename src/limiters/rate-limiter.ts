import type { Algorithm } from '../algorithms/algorithm.ts';
import { type CoreOptions, LimiterCore } from './core.ts';
import type { Lease } from './lease.ts';
import type { LimitShape, MemorySlot } from './limiter.ts';
import { decideNow, MemoryLimiterBase } from './memory-limiter.ts';

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
export abstract class RateLimiter extends MemoryLimiterBase implements LimiterSpec {
  readonly signature: string;
  /** @internal */
  readonly core: LimiterCore;
  readonly #only: MemorySlot;

  protected constructor(
    readonly algorithm: Algorithm,
    readonly options: CoreOptions,
    core: LimiterCore = new LimiterCore(algorithm, options),
  ) {
    super();
    this.signature = `${algorithm.signature}|q${options.queueLimit}:${options.queueOrder}:${options.countRejected ? 1 : 0}`;
    this.core = core;
    this.core.source = this;
    this.core.allocate(options.clock.now());
    this.#only = { core, slot: 0, key: undefined };
  }

  /** The most permits one request may ask for. */
  get limit(): number {
    return this.algorithm.limit;
  }

  /** What its header fields say: its algorithm's limit and window. */
  get shape(): LimitShape {
    return this.algorithm;
  }

  shapeFor(_key: string): LimitShape {
    return this.algorithm;
  }

  /** Whether it may hold a request in its queue (`queueLimit` > 0). */
  get mayQueue(): boolean {
    return this.options.queueLimit > 0;
  }

  /** Its one state (there are no partitions: `key` is ignored). */
  bind(_key: string | undefined, _permits: number): MemorySlot {
    return this.#only;
  }

  available(_key: string | undefined): number {
    return this.core.peek(0, this.options.clock.now()).available;
  }

  /** Decides now and never waits. `permits = 0` probes: granted when a permit is available, consuming nothing. */
  tryAcquire(permits = 1): Lease {
    // The base's template without the bind step: one state, nothing to look up (the hottest call there is).
    return decideNow(this.core, 0, undefined, permits, true, undefined);
  }

  /**
   * Grants now if it can; otherwise waits in the queue while `queueLimit` leaves room; otherwise resolves at once
   * with a rejected lease (`'limit'`, or `'queue-full'` when there is a queue). Charged once, when admitted.
   */
  acquire(permits = 1, options?: AcquireOptions): Promise<Lease> {
    return this.acquireFor(undefined, permits, options?.signal);
  }

  /** Permits available and queued now, and the totals granted and rejected. */
  statistics(): Statistics {
    const { available, queued } = this.core.peek(0, this.options.clock.now());
    return { available, queued, granted: this.core.granted, rejected: this.core.rejected };
  }
}
