import type { Lease } from '../limiters/lease.ts';
import { DEFAULT_RANK } from '../limiters/priority.ts';

/** A request waiting locally for its turn to ask Redis again. */
export interface RedisWaiter {
  readonly permits: number;
  /** Its class (priority classes); undefined: the default class. */
  readonly rank: number | undefined;
  resolve(lease: Lease): void;
  reject(reason: unknown): void;
  /** Set once the waiter has its answer (granted, rejected, evicted or aborted). */
  done: boolean;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/**
 * The waiters of one partition (or one chain binding) in this process, by class then in arrival order. Redis keeps no queue:
 * the waiter served next asks again when the last answer said a retry could succeed (`retryAfterMs`), or when
 * this process releases a permit, or at `pollMs` when nothing tells (a concurrency permit held elsewhere).
 */
export class LocalQueue {
  readonly waiters: RedisWaiter[] = [];
  permits = 0;
  /** A pump is asking Redis for this queue now. */
  running = false;
  /** The latest rejected lease, to answer evicted waiters with. */
  last: Lease | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private wakeUp: (() => void) | undefined;

  /**
   * Adds `waiter` behind the waiters of its class and above, ahead of those of lower classes: the order served
   * is by class, then by arrival. `newestFirst` (served from the end, evicted from the front) mirrors it.
   */
  push(waiter: RedisWaiter, newestFirst = false): void {
    const rank = waiter.rank ?? DEFAULT_RANK;
    let at = this.waiters.length;
    if (newestFirst) {
      while (at > 0 && (this.waiters[at - 1].rank ?? DEFAULT_RANK) > rank) at--;
    } else {
      while (at > 0 && (this.waiters[at - 1].rank ?? DEFAULT_RANK) < rank) at--;
    }
    this.waiters.splice(at, 0, waiter);
    this.permits += waiter.permits;
  }

  /** Whether a waiter of class `rank` or above waits here (which an arrival of `rank` may not overtake). */
  holds(rank: number | undefined): boolean {
    const r = rank ?? DEFAULT_RANK;
    return this.waiters.some((w) => (w.rank ?? DEFAULT_RANK) >= r);
  }

  remove(waiter: RedisWaiter): void {
    const i = this.waiters.indexOf(waiter);
    if (i < 0) return;
    this.waiters.splice(i, 1);
    this.permits -= waiter.permits;
  }

  /** Sleeps `ms`, or less if {@link wake} is called. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wakeUp = resolve;
      this.timer = setTimeout(() => this.wake(), Math.max(1, Math.ceil(ms)));
    });
  }

  /** Ends the current sleep now (a permit came back here, or the head of the line changed). */
  wake(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const resolve = this.wakeUp;
    this.wakeUp = undefined;
    resolve?.();
  }
}

/** The waiter is leaving for good: stop listening to its signal. */
export function finish(waiter: RedisWaiter): void {
  waiter.done = true;
  if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
  waiter.onAbort = undefined;
}
