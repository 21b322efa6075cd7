import type { Algorithm } from '../algorithms/algorithm.ts';
import { type CoreOptions, LIMIT_CHANGES, LimiterCore } from './core.ts';
import type { Lease } from './lease.ts';
import type { LimitShape, MemorySlot } from './limiter.ts';
import { decideNow, MemoryLimiterBase } from './memory-limiter.ts';
import type { Priority } from './priority.ts';

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
  /**
   * The request's class. Default `'default'`. A waiter is never served while one of a higher class waits in the
   * same queue, and a full queue evicts lower classes first; `adaptiveConcurrency()` also sheds by class.
   */
  priority?: Priority;
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
  /** @internal A partitioned limiter decides partitions of this spec in `core`: a change of limit applies there too. */
  attach?(core: LimiterCore): void;
  /** @internal A remote store decides with these settings (`by` names where): from now on they may not change. */
  freeze?(by: string): void;
}

/**
 * A limiter with one state, in memory. Use the factories (`fixedWindow`, `slidingWindow`, `tokenBucket`,
 * `concurrency`); every limiter is also a {@link LimiterSpec} for `partitioned`.
 */
export abstract class RateLimiter extends MemoryLimiterBase implements LimiterSpec {
  /** @internal */
  readonly core: LimiterCore;
  readonly #only: MemorySlot;
  /** The cores of partitioned limiters built from it, held weakly: `setLimit` changes their partitions too. */
  #attached: WeakRef<LimiterCore>[] | undefined;
  /** Where a remote store took these settings, which it sends with each call and cannot follow. */
  #frozenBy: string | undefined;

  protected constructor(
    /** Its parameters now (`setLimit` replaces them). */
    readonly algorithm: Algorithm,
    readonly options: CoreOptions,
    core: LimiterCore = new LimiterCore(algorithm, options),
  ) {
    super();
    this.core = core;
    this.core.source = this;
    this.core.allocate(options.clock.now());
    this.#only = { core, slot: 0, key: undefined };
  }

  /** What identifies its settings now: two specs with equal signatures decide alike and may share storage. */
  get signature(): string {
    return this.core.signature;
  }

  /** @internal */
  attach(core: LimiterCore): void {
    if (core === this.core) return;
    this.#attached ??= [];
    const attached = this.#attached;
    for (let i = attached.length - 1; i >= 0; i--) {
      const known = attached[i].deref();
      if (known === core) return;
      if (known === undefined) attached.splice(i, 1);
    }
    attached.push(new WeakRef(core));
  }

  /** @internal */
  freeze(by: string): void {
    this.#frozenBy ??= by;
  }

  /**
   * Decides with `next` from now on, here and in every partition built from this limiter (Go's `SetLimitAt`: each
   * state is brought to now under the old parameters first). See the subclasses' `setLimit`.
   */
  protected retune(where: string, next: Algorithm): void {
    if (this.#frozenBy !== undefined) {
      throw new TypeError(
        `${where}: this limiter gives its settings to a Redis limiter (${this.#frozenBy}), whose state every process shares; limits on Redis cannot change at run time: build a new Redis limiter with the new settings`,
      );
    }
    const now = this.options.clock.now();
    this.core.retune(next, now);
    for (const ref of this.#attached ?? []) {
      const core = ref.deref();
      core?.retune(next, core.options.clock.now());
    }
    (this as { algorithm: Algorithm }).algorithm = next;
    LIMIT_CHANGES.count++;
  }

  /** What one permit is: `'requests'`, or the cost unit given as the `unit` option. */
  get unit(): string {
    return this.options.unit ?? 'requests';
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

  /**
   * Decides now and never waits. `permits = 0` probes: granted when a permit is available, consuming nothing.
   * `priority` is the request's class: it is not granted ahead of waiters of a higher class (nor, oldest-first,
   * of its own).
   */
  tryAcquire(permits = 1, priority?: Priority): Lease {
    // The base's template without the bind step: one state, nothing to look up (the hottest call there is).
    return decideNow(this.core, 0, undefined, permits, true, priority);
  }

  /**
   * Grants now if it can; otherwise waits in the queue while `queueLimit` leaves room; otherwise resolves at once
   * with a rejected lease (`'limit'`, or `'queue-full'` when there is a queue). Charged once, when admitted.
   */
  acquire(permits = 1, options?: AcquireOptions): Promise<Lease> {
    return this.acquireFor(undefined, permits, options?.signal, options?.priority);
  }

  /** Permits available and queued now, and the totals granted and rejected. */
  statistics(): Statistics {
    const { available, queued } = this.core.peek(0, this.options.clock.now());
    return { available, queued, granted: this.core.granted, rejected: this.core.rejected };
  }
}
