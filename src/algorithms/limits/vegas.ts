import type { LimitBounds, WindowSample } from './limit.ts';
import { ProbedLimit, type ProbeOptions } from './probe.ts';

/** Options of {@link VegasLimit}. */
export type VegasOptions = LimitBounds & ProbeOptions;

/**
 * Vegas (TCP Vegas, as in Netflix's VegasLimit): estimates the queue the limit lets build up,
 * `limit × (1 − baseline / latency)`, and keeps it between α = 3·log10(limit) and β = 6·log10(limit): grows by
 * β when there is next to no queue, by log10(limit) below α, shrinks by log10(limit) above β. The baseline is
 * the probed no-load latency ({@link MinRttProbe}); a window with a dropped lease backs off by `backoffRatio`.
 */
export class VegasLimit extends ProbedLimit {
  protected learn(window: WindowSample, baseline: number): boolean {
    const log = Math.max(1, Math.log10(this.limit));
    const queue = Math.ceil(this.limit * (1 - baseline / window.avgRttMs));
    const used = window.maxInflight * 2 >= this.limit;
    if (queue > 6 * log) this.limit -= log;
    else if (used && queue <= log) this.limit += 6 * log;
    else if (used && queue < 3 * log) this.limit += log;
    return queue > 6 * log;
  }
}
