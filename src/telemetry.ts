/**
 * Metrics in one place. `@opentelemetry/api` is an optional peer: when it is not installed, or no SDK is
 * registered, every instrument here is a no-op and costs one property read per call.
 */

/** Attributes attached to a measurement. */
export type Attributes = Record<string, string | number | boolean>;

interface Counter {
  add(value: number, attributes?: Attributes): void;
}
interface Histogram {
  record(value: number, attributes?: Attributes): void;
}

const noop: Counter & Histogram = { add() {}, record() {} };

interface MeterLike {
  createCounter(name: string, options?: object): Counter;
  createUpDownCounter(name: string, options?: object): Counter;
  createHistogram(name: string, options?: object): Histogram;
}

let api: { metrics: { getMeter(name: string, version?: string): MeterLike } } | undefined;
try {
  api = (await import('@opentelemetry/api')) as unknown as typeof api;
} catch {
  api = undefined;
}

/**
 * The instruments floodgate records. They are created against the global MeterProvider on first use, so an
 * application that registers its SDK after importing floodgate still gets its metrics.
 */
export interface Instruments {
  /** Rate-limited requests by `result` and `policy`. */
  requests: Counter;
  /** Leases currently held (concurrency policies). */
  activeLeases: Counter;
  /** Requests currently waiting in a queue. */
  queuedRequests: Counter;
  /** Milliseconds spent waiting in a queue. */
  timeInQueue: Histogram;
  /** Milliseconds a lease was held. */
  leaseDuration: Histogram;
  /** Live partitions (up/down). */
  partitions: Counter;
  /** Requests answered by a timeout policy, by `policy`. */
  requestTimeouts: Counter;
  /** Handlers still running at their deadline, by `policy`. */
  handlerOverruns: Counter;
  /** Milliseconds a handler ran past its deadline. */
  overrunDuration: Histogram;
  /** Outgoing calls by `result` (`sent`, `limited`, `paused`) and `origin`. */
  clientCalls: Counter;
  /** Decisions a store could not make in time, answered by `onUnavailable`, by `limiter` name. */
  storeUnavailable: Counter;
  /** The current limit of adaptive concurrency limiters (up/down by each change: a gauge). */
  concurrencyLimit: Counter;
  /** Requests an adaptive concurrency limiter turned away, by `class` and `reason`. */
  concurrencyShed: Counter;
}

let instruments: Instruments | undefined;

/** The instruments, created on first call (no-ops without `@opentelemetry/api`). */
export function telemetry(): Instruments {
  if (instruments) return instruments;
  if (!api) {
    instruments = {
      requests: noop,
      activeLeases: noop,
      queuedRequests: noop,
      timeInQueue: noop,
      leaseDuration: noop,
      partitions: noop,
      requestTimeouts: noop,
      handlerOverruns: noop,
      overrunDuration: noop,
      clientCalls: noop,
      storeUnavailable: noop,
      concurrencyLimit: noop,
      concurrencyShed: noop,
    };
    return instruments;
  }
  const meter = api.metrics.getMeter('floodgate');
  instruments = {
    requests: meter.createCounter('floodgate.requests', { description: 'Rate-limited requests by result' }),
    activeLeases: meter.createUpDownCounter('floodgate.active_leases', { description: 'Leases held' }),
    queuedRequests: meter.createUpDownCounter('floodgate.queued_requests', {
      description: 'Requests queued',
    }),
    timeInQueue: meter.createHistogram('floodgate.time_in_queue', { unit: 'ms' }),
    leaseDuration: meter.createHistogram('floodgate.lease_duration', { unit: 'ms' }),
    partitions: meter.createUpDownCounter('floodgate.partitions', { description: 'Live partitions' }),
    requestTimeouts: meter.createCounter('floodgate.request_timeouts', { description: 'Requests timed out' }),
    handlerOverruns: meter.createCounter('floodgate.handler_overruns', {
      description: 'Handlers still running at their deadline',
    }),
    overrunDuration: meter.createHistogram('floodgate.overrun_duration', { unit: 'ms' }),
    clientCalls: meter.createCounter('floodgate.client.calls', { description: 'Outgoing calls by result' }),
    storeUnavailable: meter.createCounter('floodgate.store.unavailable', {
      description: 'Decisions answered by onUnavailable because the store failed or was late',
    }),
    concurrencyLimit: meter.createUpDownCounter('floodgate.concurrency.limit', {
      description: 'The current limit of adaptive concurrency limiters',
    }),
    concurrencyShed: meter.createCounter('floodgate.concurrency.shed', {
      description: 'Requests shed by adaptive concurrency limiters, by class and reason',
    }),
  };
  return instruments;
}

/** Forget the instruments so the next {@link telemetry} call binds to the current MeterProvider (tests). */
export function resetTelemetry(): void {
  instruments = undefined;
}
