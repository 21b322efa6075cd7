/**
 * What a concurrency-limit algorithm learns from: the leases released during one sampling window, aggregated.
 * The round-trip time of a lease is the time from its grant to its release.
 */
export interface WindowSample {
  /** When the window closed, on the limiter's clock (ms). */
  readonly now: number;
  /** Leases released as successes in the window (their round-trip times are below). */
  readonly count: number;
  /** Leases released with `{ dropped: true }` (timeouts, 5xx of a dependency): their times are not used. */
  readonly dropped: number;
  /** Mean round-trip time of the successes, ms (NaN when `count` is 0). */
  readonly avgRttMs: number;
  /** Least round-trip time of the successes, ms (NaN when `count` is 0). */
  readonly minRttMs: number;
  /** The most permits held at once during the window. */
  readonly maxInflight: number;
}

/**
 * A concurrency-limit algorithm (Netflix concurrency-limits' `Limit`): it knows nothing of queues or leases,
 * only windows of samples in and a limit out. Deterministic: time comes in with the samples.
 */
export interface Limit {
  /** The current limit, a real number in [minLimit, maxLimit]; the limiter admits `Math.floor(limit)`. */
  readonly limit: number;
  /** Learns from one closed window and returns the new limit. */
  update(window: WindowSample): number;
}

/** Bounds and reactions every algorithm shares. */
export interface LimitBounds {
  readonly initialLimit: number;
  readonly minLimit: number;
  readonly maxLimit: number;
  /** Multiplier applied to the limit after a window with a dropped lease (above 0.4, at most 1). */
  readonly backoffRatio: number;
}

/** `value` clamped to [min, max]. */
export function clamp(value: number, min: number, max: number): number {
  return Math.max(min, Math.min(max, value));
}
