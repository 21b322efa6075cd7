import { clamp, type Limit, type LimitBounds, type WindowSample } from './limit.ts';

/** Options of {@link AimdLimit}. */
export interface AimdOptions extends LimitBounds {
  /** A window whose mean latency exceeds this counts as a drop, ms. */
  readonly timeoutMs: number;
}

/**
 * AIMD, as TCP Reno and Netflix's AIMDLimit: +1 per window that used at least half the limit, × `backoffRatio`
 * per window with a dropped lease or a mean latency above `timeoutMs`. Needs no baseline, so it reacts only to
 * drops and to the fixed latency threshold you give it.
 */
export class AimdLimit implements Limit {
  limit: number;

  constructor(readonly options: AimdOptions) {
    this.limit = options.initialLimit;
  }

  update(window: WindowSample): number {
    const o = this.options;
    if (window.dropped > 0 || window.avgRttMs > o.timeoutMs) {
      this.limit = clamp(this.limit * o.backoffRatio, o.minLimit, o.maxLimit);
    } else if (window.count > 0 && window.maxInflight * 2 >= this.limit) {
      this.limit = clamp(this.limit + 1, o.minLimit, o.maxLimit);
    }
    return this.limit;
  }
}
