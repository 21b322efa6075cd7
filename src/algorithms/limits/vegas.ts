import { clamp, type Limit, type LimitBounds, type WindowSample } from './limit.ts';
import { MinRttProbe, type ProbeOptions } from './probe.ts';

/** Options of {@link VegasLimit}. */
export type VegasOptions = LimitBounds & ProbeOptions;

/**
 * Vegas (TCP Vegas, as in Netflix's VegasLimit): estimates the queue the limit lets build up,
 * `limit × (1 − baseline / latency)`, and keeps it between α = 3·log10(limit) and β = 6·log10(limit): grows by
 * β when there is next to no queue, by log10(limit) below α, shrinks by log10(limit) above β. The baseline is
 * the probed no-load latency ({@link MinRttProbe}); a window with a dropped lease backs off by `backoffRatio`.
 */
export class VegasLimit implements Limit {
  limit: number;
  private readonly probe: MinRttProbe;
  private saved: number;

  constructor(readonly options: VegasOptions) {
    this.limit = options.initialLimit;
    this.saved = options.initialLimit;
    this.probe = new MinRttProbe(options);
    this.limit = this.pin();
  }

  update(window: WindowSample): number {
    const o = this.options;
    if (this.probe.probing) {
      if (this.probe.measure(window)) this.limit = this.saved;
      return this.limit;
    }
    if (window.dropped > 0) {
      this.limit = clamp(this.limit * o.backoffRatio, o.minLimit, o.maxLimit);
      return this.limit;
    }
    if (window.count === 0) return this.limit;
    const log = Math.max(1, Math.log10(this.limit));
    const queue = Math.ceil(this.limit * (1 - this.probe.baseline / window.avgRttMs));
    const congested = queue > 6 * log;
    const used = window.maxInflight * 2 >= this.limit;
    if (congested) this.limit -= log;
    else if (used && queue <= log) this.limit += 6 * log;
    else if (used && queue < 3 * log) this.limit += log;
    this.limit = clamp(this.limit, o.minLimit, o.maxLimit);
    if (this.probe.observe(window, congested, this.limit)) this.limit = this.pin();
    return this.limit;
  }

  private pin(): number {
    this.saved = this.limit;
    return clamp(this.options.probeLimit, this.options.minLimit, this.options.maxLimit);
  }
}
