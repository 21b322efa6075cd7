import type { Clock } from '../limiters/core.ts';
import { KeyedCounts } from './keyed-counts.ts';

/**
 * The rejection probability from which an accept weighs as the calls it was let through for (see
 * {@link AdaptiveThrottle.record}). At 0.9 the weight only plays while the server accepts fewer than about
 * `0.1 / k` of the calls offered: an outage, or an overload deep enough that probes are all it gets.
 */
export const PROBE_LEVEL = 0.9;

/** Settings of an {@link AdaptiveThrottle}. */
export interface AdaptiveThrottleOptions {
  /** Accepts count this many times against requests: the server may see up to `k` times what it accepts. */
  k: number;
  historyMs: number;
  buckets: number;
  /** The rejection probability never goes above this (some calls always probe the server). */
  maxRejection: number;
  /** Below this many requests in the history, nothing is rejected. */
  minRequests: number;
  maxEntries: number;
  clock: Clock;
  random: () => number;
}

/**
 * Client-side adaptive throttling (Google SRE book, "Handling Overload"; grpc-go's `adaptive.Throttler`): per
 * partition, the requests of the last `historyMs` and how many the server accepted. A call is rejected locally
 * with probability `max(0, (requests − k·accepts) / (requests + 1))`, capped at `maxRejection`. Local rejections
 * count as requests (as in grpc-go), so while the server accepts nothing the client sends almost nothing, and
 * each accept lowers the probability for the calls after it. An accept drawn at a probability of
 * {@link PROBE_LEVEL} or more weighs more (see {@link AdaptiveThrottle.record}), so that recovery from an
 * outage does not wait for the outage to leave the history.
 */
export class AdaptiveThrottle {
  private readonly histories: KeyedCounts;

  constructor(readonly options: AdaptiveThrottleOptions) {
    this.histories = new KeyedCounts({
      windowMs: options.historyMs,
      buckets: options.buckets,
      maxEntries: options.maxEntries,
      clock: options.clock,
    });
  }

  /** The probability that the next call to `key` is rejected locally. */
  probability(key: string): number {
    const history = this.histories.peek(key);
    if (history === undefined) return 0;
    const now = this.options.clock.now();
    const requests = history.total(now);
    if (requests < this.options.minRequests) return 0;
    const p = (requests - this.options.k * history.marked(now)) / (requests + 1);
    return p <= 0 ? 0 : Math.min(p, this.options.maxRejection);
  }

  /**
   * Draws for one call to `key`: the probability it was rejected with, or `undefined` when it may go. A
   * rejection is recorded as a request that was not accepted.
   */
  reject(key: string): number | undefined {
    const p = this.probability(key);
    if (p === 0 || this.options.random() >= p) return undefined;
    this.histories.get(key).add(this.options.clock.now(), 1, 0);
    return p;
  }

  /**
   * Records the outcome of a call that went to the server. An accept recorded while the probability `p` is at
   * least {@link PROBE_LEVEL} (or `maxRejection`, when lower) counts `1 / (1 − p)` accepts: that call was one of
   * the few let through, standing for the `1 / (1 − p)` calls drawn with it, and the server that accepted it
   * would likely have accepted them too. Without the weight, accepts come back only as fast as the calls that go
   * out, so recovery from the floor grows by about e^k per history (two histories and more); with it, the
   * probability comes off the floor within a fraction of a history. Below that level an accept counts 1: an
   * overloaded server that accepts more than about `(1 − PROBE_LEVEL) / k` of the offered calls keeps being
   * sent about `k` times what it accepts.
   */
  record(key: string, accepted: boolean): void {
    let weight = 0;
    if (accepted) {
      const p = this.probability(key);
      weight = p >= Math.min(PROBE_LEVEL, this.options.maxRejection) ? 1 / (1 - p) : 1;
    }
    this.histories.get(key).add(this.options.clock.now(), 1, weight);
  }
}
