import type { Clock } from '../limiters/core.ts';

/** Settings of a {@link PauseBook}. */
export interface PauseBookOptions {
  /** The longest pause kept, in milliseconds, before jitter. */
  maxMs: number;
  /** Up to this fraction of a pause is added at random. */
  jitter: number;
  /** Partitions remembered at once. */
  maxEntries: number;
  clock: Clock;
  random: () => number;
}

/**
 * When each partition may call its server again, after the server asked it to pause. A small bounded `Map`:
 * pauses are rare and short-lived, so the common case — nothing paused — costs one `size` check.
 */
export class PauseBook {
  private readonly until = new Map<string, number>();

  constructor(private readonly options: PauseBookOptions) {}

  /** Partitions paused (or whose pause ended and was not yet looked at). */
  get size(): number {
    return this.until.size;
  }

  /** Milliseconds before `key` may call again; 0 when it is not paused. */
  remaining(key: string): number {
    if (this.until.size === 0) return 0;
    const until = this.until.get(key);
    if (until === undefined) return 0;
    const left = until - this.options.clock.now();
    if (left > 0) return left;
    this.until.delete(key);
    return 0;
  }

  /**
   * Pauses `key` for `ms` (capped at `maxMs`, plus jitter). A pause only ever extends: a shorter answer arriving
   * late does not shorten a longer one. Returns the milliseconds left on the partition's pause.
   */
  pause(key: string, ms: number): number {
    const { maxMs, jitter, clock, random } = this.options;
    const now = clock.now();
    const capped = Math.min(ms, maxMs);
    const until = now + capped + capped * jitter * random();
    const current = this.until.get(key);
    if (current !== undefined && current >= until) return current - now;
    if (current === undefined && this.until.size >= this.options.maxEntries) this.makeRoom(now);
    this.until.set(key, until);
    return until - now;
  }

  /** Drops ended pauses; when every one is live, the one that ends first (the least harm in forgetting it). */
  private makeRoom(now: number): void {
    let soonest: string | undefined;
    let soonestAt = Number.POSITIVE_INFINITY;
    for (const [key, until] of this.until) {
      if (until <= now) this.until.delete(key);
      else if (until < soonestAt) {
        soonest = key;
        soonestAt = until;
      }
    }
    if (this.until.size >= this.options.maxEntries && soonest !== undefined) this.until.delete(soonest);
  }
}
