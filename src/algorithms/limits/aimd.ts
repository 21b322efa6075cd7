import type { LimitBounds, WindowSample } from './limit.ts';
import { ProbedLimit, type ProbeOptions } from './probe.ts';

/** Options of {@link AimdLimit}. */
export interface AimdOptions extends LimitBounds, ProbeOptions {
  /** A window whose mean latency is above this multiple of the probed no-load latency counts as a drop (> 1). */
  readonly tolerance: number;
  /**
   * A fixed threshold instead, ms: a window whose mean latency exceeds it counts as a drop. When finite, nothing
   * is probed (the threshold needs no baseline) and `tolerance` is unused.
   */
  readonly timeoutMs: number;
}

/** The probe options of a fixed threshold: never probe. */
const NEVER = {
  probeWindows: 0,
  probeIntervalMs: Number.POSITIVE_INFINITY,
  shiftWindows: Number.POSITIVE_INFINITY,
};

/**
 * AIMD, as TCP Reno and Netflix's AIMDLimit: +1 per window that used at least half the limit, × `backoffRatio`
 * per window with a dropped lease or a mean latency above the threshold.
 *
 * The threshold is `tolerance` × the no-load latency, measured as gradient and vegas measure it
 * ({@link MinRttProbe}): Netflix's AIMDLimit asks for a fixed timeout, and a guessed one either never fires (the
 * limit climbs to its maximum and latency with it) or, once the dependency gets slower for good, fires on every
 * window (the limit sits at its minimum). A probed baseline is re-measured after such a level shift. With a
 * finite `timeoutMs` it is the classic rule: that fixed threshold, nothing probed.
 */
export class AimdLimit extends ProbedLimit {
  private readonly fixed: boolean;

  constructor(readonly options: AimdOptions) {
    const fixed = Number.isFinite(options.timeoutMs);
    super(fixed ? { ...options, ...NEVER } : options);
    this.fixed = fixed;
  }

  protected learn(window: WindowSample, baseline: number): boolean {
    const o = this.options;
    const congested = window.avgRttMs > (this.fixed ? o.timeoutMs : o.tolerance * baseline);
    if (congested) this.limit *= o.backoffRatio;
    else if (window.maxInflight * 2 >= this.limit) this.limit += 1;
    return congested;
  }
}
