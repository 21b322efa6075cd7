import type { Clock } from '../limiters/core.ts';
import { SlidingCounts } from './sliding-counts.ts';

/** Settings of a {@link KeyedCounts}. */
export interface KeyedCountsOptions {
  windowMs: number;
  buckets: number;
  /** Partitions remembered at once. */
  maxEntries: number;
  clock: Clock;
}

/**
 * One {@link SlidingCounts} per partition, in a bounded `Map`. When full, histories that have emptied go first,
 * then the oldest one created: forgetting a partition only forgets its recent past, which the next calls rebuild.
 */
export class KeyedCounts {
  private readonly byKey = new Map<string, SlidingCounts>();

  constructor(readonly options: KeyedCountsOptions) {}

  /** Partitions with a history. */
  get size(): number {
    return this.byKey.size;
  }

  /** The history of `key`, if it has one. */
  peek(key: string): SlidingCounts | undefined {
    return this.byKey.get(key);
  }

  /** The history of `key`, created empty when it has none. */
  get(key: string): SlidingCounts {
    let counts = this.byKey.get(key);
    if (counts !== undefined) return counts;
    const { windowMs, buckets, maxEntries, clock } = this.options;
    const now = clock.now();
    if (this.byKey.size >= maxEntries) this.makeRoom(now);
    counts = new SlidingCounts(windowMs, buckets, now);
    this.byKey.set(key, counts);
    return counts;
  }

  private makeRoom(now: number): void {
    for (const [key, counts] of this.byKey) if (counts.empty(now)) this.byKey.delete(key);
    if (this.byKey.size < this.options.maxEntries) return;
    const oldest = this.byKey.keys().next();
    if (!oldest.done) this.byKey.delete(oldest.value);
  }
}
