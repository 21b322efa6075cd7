import type { Concurrency } from '../algorithms/concurrency.ts';
import { LimiterCore } from './core.ts';
import { DEFAULT_RANK } from './priority.ts';

/**
 * The core of a concurrency limiter with priority classes (`concurrency({ classes })`): a request of class
 * `rank` is granted only while the permits held after it stay within what the shares reserved for higher
 * classes leave it, and a queued waiter is served by the same rule. A core of its own so that limiters without
 * classes keep the plain decision path.
 */
export class ClassedCore extends LimiterCore {
  declare algorithm: Concurrency;

  override canGrant(slot: number, permits: number, now: number, rank = DEFAULT_RANK): boolean {
    return super.canGrant(slot, permits, now, rank) && this.admits(slot, permits === 0 ? 1 : permits, rank);
  }

  protected override admits(slot: number, need: number, rank: number): boolean {
    const held = this.table.states[slot * this.algorithm.width];
    return held + need <= this.algorithm.ceiling(rank);
  }
}
