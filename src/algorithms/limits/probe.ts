import { clamp, type Limit, type LimitBounds, type WindowSample } from './limit.ts';

/** Options of {@link MinRttProbe}. */
export interface ProbeOptions {
  /** The limit held while the no-load latency is measured. */
  readonly probeLimit: number;
  /** Windows measured at `probeLimit` per probe; 0: never probe (an algorithm with a fixed threshold). */
  readonly probeWindows: number;
  /** Time between scheduled probes, ms. */
  readonly probeIntervalMs: number;
  /** Consecutive congested windows after which a probe starts early: latency did not fall when the limit did. */
  readonly shiftWindows: number;
}

/**
 * The no-load round-trip time, measured as Envoy's adaptive concurrency filter does: pin the limit low for a few
 * windows and take the least mean latency seen, at start, every `probeIntervalMs`, and early when the latency
 * stays high although the limit was cut (the dependency itself got slower: a level shift, not queueing).
 *
 * Why not an average of all samples (Gradient2's long RTT): that baseline follows the latency up under modest,
 * steady overload, so the limit creeps upward (Netflix/concurrency-limits #134). A baseline measured at low
 * concurrency cannot be inflated by the load the limit lets in.
 */
export class MinRttProbe {
  /** The no-load latency, ms; NaN until the first probe has measured it. */
  baseline = Number.NaN;
  /** Whether a probe is running (the algorithm must hold `probeLimit`). */
  probing: boolean;
  private best = Number.POSITIVE_INFINITY;
  private windowsLeft: number;
  private nextProbeAt = Number.POSITIVE_INFINITY;
  private congested = 0;
  private streakStart = 0;

  constructor(readonly options: ProbeOptions) {
    this.windowsLeft = options.probeWindows;
    this.probing = options.probeWindows > 0;
  }

  /**
   * Feeds a window measured while probing; returns true when the probe has just finished (the baseline is set
   * and the algorithm may restore its limit).
   */
  measure(window: WindowSample): boolean {
    if (window.count > 0) {
      if (window.avgRttMs < this.best) this.best = window.avgRttMs;
      this.windowsLeft--;
    }
    if (this.windowsLeft > 0) return false;
    this.baseline = this.best;
    this.probing = false;
    this.congested = 0;
    this.nextProbeAt = window.now + this.options.probeIntervalMs;
    return true;
  }

  /**
   * After a normal window: `congested` says the latency was above tolerance, `limit` is the limit now. Returns
   * true when a probe starts: when one is due, or when the latency has stayed above tolerance for
   * `shiftWindows` windows in a row while the limit fell by a quarter or more (queueing would have drained by
   * then; a slower dependency does not get faster). An equilibrium that hovers just above tolerance, cutting a
   * little and growing a little, is not a shift.
   */
  observe(window: WindowSample, congested: boolean, limit: number): boolean {
    if (!congested) this.congested = 0;
    else if (this.congested++ === 0) this.streakStart = limit;
    const shifted = this.congested >= this.options.shiftWindows && limit <= this.streakStart * 0.75;
    if (!shifted && window.now < this.nextProbeAt) return false;
    this.start();
    return true;
  }

  private start(): void {
    this.probing = true;
    this.best = Number.POSITIVE_INFINITY;
    this.windowsLeft = this.options.probeWindows;
  }
}

/**
 * A limit learnt against the probed no-load latency (gradient, vegas, aimd): probing, drops and empty windows are
 * handled here; {@link learn} moves the limit on an ordinary window and says whether it was congested.
 */
export abstract class ProbedLimit implements Limit {
  limit: number;
  protected readonly probe: MinRttProbe;
  private saved: number;

  constructor(readonly bounds: LimitBounds & ProbeOptions) {
    this.limit = bounds.initialLimit;
    this.saved = bounds.initialLimit;
    this.probe = new MinRttProbe(bounds);
    if (this.probe.probing) this.limit = this.pin();
  }

  update(window: WindowSample): number {
    const o = this.bounds;
    if (this.probe.probing) {
      if (this.probe.measure(window)) this.limit = this.saved;
      return this.limit;
    }
    if (window.dropped > 0) {
      this.limit = clamp(this.limit * o.backoffRatio, o.minLimit, o.maxLimit);
      return this.limit;
    }
    if (window.count === 0) return this.limit;
    const congested = this.learn(window, this.probe.baseline);
    // A limit that was not used is not known to be safe (TCP's congestion window validation, RFC 7661): a
    // window that used under half of it moves it halfway to twice what it used, so the first burst after a
    // quiet spell meets a limit near what was last tested, not the initial one (bench:overload:sockets).
    if (!congested && window.maxInflight * 2 < this.limit)
      this.limit = (this.limit + 2 * window.maxInflight) / 2;
    this.limit = clamp(this.limit, o.minLimit, o.maxLimit);
    if (this.probe.observe(window, congested, this.limit)) this.limit = this.pin();
    return this.limit;
  }

  /** Moves `this.limit` after an ordinary window; returns whether latency was above tolerance. */
  protected abstract learn(window: WindowSample, baseline: number): boolean;

  /** Starts holding the probe limit, remembering the limit to come back to. */
  private pin(): number {
    this.saved = this.limit;
    return clamp(this.bounds.probeLimit, this.bounds.minLimit, this.bounds.maxLimit);
  }
}
