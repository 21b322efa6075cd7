/**
 * Metrics in one place. `@opentelemetry/api` is an optional peer: when it is not installed, or no SDK is
 * registered, every instrument here is a no-op and costs one property read per call.
 */

import peerRequire from './peer-require.cts';

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

interface Api {
  metrics: { getMeter(name: string, version?: string): MeterLike };
  /** The meter the API hands out while no SDK is registered (a singleton; since @opentelemetry/api 1.3). */
  createNoopMeter?(): MeterLike;
}

/**
 * `@opentelemetry/api`, or undefined when it is not installed. Loaded synchronously on first use: a top-level
 * `await import()` would make every entry point an async module, which `require()` refuses
 * (ERR_REQUIRE_ASYNC_MODULE). Its CommonJS build may be a second copy beside the ESM one an application
 * imports; both keep the registered MeterProvider in one global slot, so either sees the application's SDK.
 */
function loadApi(): Api | undefined {
  try {
    return peerRequire('@opentelemetry/api') as Api;
  } catch {
    return undefined;
  }
}

/** The version the meter reports (`getMeter('floodgate', version)`); a test keeps it equal to package.json's. */
export const METER_VERSION = '0.1.0';

/**
 * The instruments floodgate records. They are created against the global MeterProvider on first use, so an
 * application that registers its SDK after importing floodgate still gets its metrics. Durations are in seconds
 * (unit `s`), as OpenTelemetry's semantic conventions and ASP.NET Core's `aspnetcore.rate_limiting.*` have them.
 */
export interface Instruments {
  /** Rate-limited requests by `result` and `policy` (and `http.route` where known). */
  requests: Counter;
  /** Leases currently held (concurrency policies), by `policy` (and `http.route` where known). */
  activeLeases: Counter;
  /** Requests currently waiting in a queue, by `policy` (and `http.route` where known). */
  queuedRequests: Counter;
  /** Seconds spent waiting in a queue, by `policy` and the `result` the wait ended with (and `http.route`). */
  timeInQueue: Histogram;
  /** Seconds a lease was held, by `policy` (and `http.route` where known). */
  leaseDuration: Histogram;
  /** Live partitions (up/down). */
  partitions: Counter;
  /** Requests answered by a timeout policy, by `policy` and `result` (and `http.route` where known). */
  requestTimeouts: Counter;
  /** Handlers still running at their deadline, by `policy` (and `http.route` where known). */
  handlerOverruns: Counter;
  /** Seconds a handler ran past its deadline, by `policy` (and `http.route` where known). */
  overrunDuration: Histogram;
  /** Outgoing calls by `result` (`sent`, `limited`, `paused`, `throttled`) and `origin`. */
  clientCalls: Counter;
  /** Retries of outgoing calls by `result` (`retried`, `budget-exhausted`) and `origin`. */
  clientRetries: Counter;
  /** Decisions a store could not make in time, answered by `onUnavailable`, by `limiter` name. */
  storeUnavailable: Counter;
  /** The current limit of adaptive concurrency limiters (up/down by each change: a gauge). */
  concurrencyLimit: Counter;
  /** Requests an adaptive concurrency limiter turned away, by `class` and `reason`. */
  concurrencyShed: Counter;
}

let instruments: Instruments | undefined;

/**
 * Whether measurements go anywhere (`@opentelemetry/api` is installed and an SDK was registered when floodgate
 * first recorded): adapters skip work that only feeds metric attributes (the route template) when they do not.
 */
export function metricsRecorded(): boolean {
  return telemetry().requests !== noop;
}

/** The instruments, created on first call (no-ops without `@opentelemetry/api`, or when no SDK is registered then). */
export function telemetry(): Instruments {
  if (instruments) return instruments;
  const api = loadApi();
  if (!api) return noInstruments();
  const meter = api.metrics.getMeter('floodgate', METER_VERSION);
  // No SDK registered: the API's meter records nothing. floodgate's own no-ops say so to metricsRecorded(), so
  // that an application which has the API only because another dependency brought it pays for no attributes.
  if (meter === api.createNoopMeter?.()) return noInstruments();
  const requests = { unit: '{request}' };
  const seconds = { unit: 's' };
  instruments = {
    requests: meter.createCounter('floodgate.requests', {
      ...requests,
      description: 'Requests decided by a rate-limiting policy, by result',
    }),
    activeLeases: meter.createUpDownCounter('floodgate.active_leases', {
      ...requests,
      description: 'Requests holding a concurrency permit',
    }),
    queuedRequests: meter.createUpDownCounter('floodgate.queued_requests', {
      ...requests,
      description: "Requests waiting in a rate limiter's queue",
    }),
    timeInQueue: meter.createHistogram('floodgate.time_in_queue', {
      ...seconds,
      description: "Time a request waited in a rate limiter's queue, by how the wait ended",
    }),
    leaseDuration: meter.createHistogram('floodgate.lease_duration', {
      ...seconds,
      description: 'Time a request held its concurrency permit',
    }),
    partitions: meter.createUpDownCounter('floodgate.partitions', {
      unit: '{partition}',
      description: 'Partitions alive in a partitioned limiter',
    }),
    requestTimeouts: meter.createCounter('floodgate.request_timeouts', {
      ...requests,
      description: 'Requests whose deadline passed, by what was done about it',
    }),
    handlerOverruns: meter.createCounter('floodgate.handler_overruns', {
      ...requests,
      description: 'Handlers still running at their deadline',
    }),
    overrunDuration: meter.createHistogram('floodgate.overrun_duration', {
      ...seconds,
      description: 'Time a handler ran past its deadline',
    }),
    clientCalls: meter.createCounter('floodgate.client.calls', {
      unit: '{call}',
      description: 'Outgoing calls of a rate-limited fetch, by result',
    }),
    clientRetries: meter.createCounter('floodgate.client.retries', {
      unit: '{retry}',
      description: 'Retries of outgoing calls, and retries refused by the retry budget',
    }),
    storeUnavailable: meter.createCounter('floodgate.store.unavailable', {
      unit: '{decision}',
      description: 'Decisions answered by onUnavailable because the store failed or was late',
    }),
    concurrencyLimit: meter.createUpDownCounter('floodgate.concurrency.limit', {
      ...requests,
      description: 'The current limit of adaptive concurrency limiters',
    }),
    concurrencyShed: meter.createCounter('floodgate.concurrency.shed', {
      ...requests,
      description: 'Requests shed by adaptive concurrency limiters, by class and reason',
    }),
  };
  return instruments;
}

/** Binds the instruments to floodgate's own no-ops, which {@link metricsRecorded} recognises. */
function noInstruments(): Instruments {
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
    clientRetries: noop,
    storeUnavailable: noop,
    concurrencyLimit: noop,
    concurrencyShed: noop,
  };
  return instruments;
}

/** Forget the instruments so the next {@link telemetry} call binds to the current MeterProvider (tests). */
export function resetTelemetry(): void {
  instruments = undefined;
}
