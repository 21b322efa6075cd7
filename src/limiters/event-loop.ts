import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

/**
 * What an adaptive limiter asks about the process's event loop. Times are on the limiter's clock (ms).
 * Inject one in tests; {@link eventLoopMonitor} is the process-wide default.
 */
export interface EventLoopMonitor {
  /** Whether the loop stalled (a GC pause, a blocking call) at some point between `since` and `now`. */
  stalledSince(since: number, now: number): boolean;
  /** The event-loop delay measured recently (p99 of the last interval), ms. */
  delayMs(): number;
  /** The event-loop utilisation of the last interval, 0–1. */
  utilization(): number;
}

const INTERVAL_MS = 100;
const STALL_MS = 50;

let shared: DefaultMonitor | undefined;

/**
 * The process-wide monitor, started on first use: `perf_hooks.monitorEventLoopDelay` read every 100 ms by an
 * unref'd timer (it never keeps the process alive). A stall is an interval whose longest delay exceeded 50 ms,
 * or a check that is itself 50 ms late (the stall is still being paid for); times are `performance.now()`.
 */
export function eventLoopMonitor(): EventLoopMonitor {
  shared ??= new DefaultMonitor();
  return shared;
}

class DefaultMonitor implements EventLoopMonitor {
  private readonly histogram = monitorEventLoopDelay({ resolution: 10 });
  private lastStallEnd = Number.NEGATIVE_INFINITY;
  private lastCheck = performance.now();
  private delay = 0;
  private elu = performance.eventLoopUtilization();
  private util = 0;

  constructor() {
    this.histogram.enable();
    setInterval(() => this.check(), INTERVAL_MS).unref();
  }

  stalledSince(since: number, now: number): boolean {
    return this.lastStallEnd > since || now - this.lastCheck > INTERVAL_MS + STALL_MS;
  }

  delayMs(): number {
    return this.delay;
  }

  utilization(): number {
    return this.util;
  }

  private check(): void {
    const now = performance.now();
    const late = now - this.lastCheck - INTERVAL_MS;
    if (this.histogram.max / 1e6 > STALL_MS || late > STALL_MS) this.lastStallEnd = now;
    this.delay = this.histogram.count > 0 ? this.histogram.percentile(99) / 1e6 : 0;
    this.histogram.reset();
    const elu = performance.eventLoopUtilization(this.elu);
    this.elu = performance.eventLoopUtilization();
    this.util = elu.utilization;
    this.lastCheck = now;
  }
}
