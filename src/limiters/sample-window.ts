import type { WindowSample } from '../algorithms/limits/limit.ts';

/**
 * Aggregates lease round-trip times into windows: a window closes once it is `windowMs` old and holds
 * `minSamples` leases, or once it is ten windows old with at least one, so a quiet limiter still learns.
 */
export class SampleWindow {
  private start: number;
  private count = 0;
  private dropped = 0;
  private sum = 0;
  private min = Number.POSITIVE_INFINITY;
  /** The most permits held at once since the window opened (raised by the limiter on each grant). */
  maxInflight = 0;

  constructor(
    readonly windowMs: number,
    readonly minSamples: number,
    now: number,
  ) {
    this.start = now;
  }

  /** Adds one released lease. */
  add(rttMs: number, dropped: boolean): void {
    if (dropped) {
      this.dropped++;
      return;
    }
    this.count++;
    this.sum += rttMs;
    if (rttMs < this.min) this.min = rttMs;
  }

  /** The closed window when it is due (a new one opens with `held` in flight), else undefined. */
  close(now: number, held: number): WindowSample | undefined {
    const age = now - this.start;
    const n = this.count + this.dropped;
    if (n === 0 || age < this.windowMs || (n < this.minSamples && age < this.windowMs * 10)) return undefined;
    const sample: WindowSample = {
      now,
      count: this.count,
      dropped: this.dropped,
      avgRttMs: this.count === 0 ? Number.NaN : this.sum / this.count,
      minRttMs: this.count === 0 ? Number.NaN : this.min,
      maxInflight: this.maxInflight,
    };
    this.start = now;
    this.count = this.dropped = this.sum = 0;
    this.min = Number.POSITIVE_INFINITY;
    this.maxInflight = held;
    return sample;
  }
}
