import type { LimitBounds, WindowSample } from './limit.ts';
import { ProbedLimit, type ProbeOptions } from './probe.ts';

/** Options of {@link GradientLimit}. */
export interface GradientOptions extends LimitBounds, ProbeOptions {
  /** Latency may be this multiple of the no-load latency before the limit is cut (> 1). */
  readonly tolerance: number;
  /** How much of each cut is applied per window (0–1]: 1 applies the whole gradient at once. */
  readonly smoothing: number;
}

/**
 * Gradient: the limit follows the ratio of the no-load latency to the window's latency, as Netflix's Gradient2
 * and Envoy's gradient controller do. While latency is within `tolerance` × the baseline the limit grows by
 * √limit per window (when the window actually used at least half of it); above, it is multiplied by
 * `tolerance × baseline / latency` (never by less than 0.5), smoothed.
 *
 * Departures from Gradient2, each for a known weakness: the baseline is measured by {@link MinRttProbe}, not a
 * long average of all samples (which creeps upward under steady overload, #134); a window with a dropped lease
 * never grows the limit and backs it off by `backoffRatio` (Gradient2 ignores drops, so steady timeouts — a
 * constant latency — grew it to the maximum, #137); dropped leases' times are not latency samples.
 */
export class GradientLimit extends ProbedLimit {
  constructor(readonly options: GradientOptions) {
    super(options);
  }

  protected learn(window: WindowSample, baseline: number): boolean {
    const o = this.options;
    const ratio = (o.tolerance * baseline) / window.avgRttMs;
    if (ratio < 1) {
      const gradient = Math.max(0.5, ratio);
      const target = this.limit * gradient + Math.sqrt(this.limit);
      this.limit = Math.min(this.limit, this.limit * (1 - o.smoothing) + target * o.smoothing);
      return true;
    }
    if (window.maxInflight * 2 >= this.limit) this.limit += Math.sqrt(this.limit);
    return false;
  }
}
