import { AimdLimit } from '../algorithms/limits/aimd.ts';
import { GradientLimit } from '../algorithms/limits/gradient.ts';
import type { Limit } from '../algorithms/limits/limit.ts';
import { VegasLimit } from '../algorithms/limits/vegas.ts';
import { PriorityClasses } from '../algorithms/priority-classes.ts';
import { type Duration, describe, parseDuration } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import type { AdaptiveSettings } from './adaptive-core.ts';
import type { Clock, CoreOptions } from './core.ts';
import { type EventLoopMonitor, eventLoopMonitor } from './event-loop.ts';
import { integer, object, oneOf, performanceClock, type QueueOptions, queueAndClock } from './options.ts';
import type { Priority } from './priority.ts';

/** The algorithms an adaptive concurrency limiter can learn its limit with. */
export type AdaptiveAlgorithm = 'gradient' | 'vegas' | 'aimd';

/** Options of `adaptiveConcurrency`. Every option has a default. */
export interface AdaptiveConcurrencyOptions extends QueueOptions {
  /** How the limit is learnt. Default `'gradient'`. */
  algorithm?: AdaptiveAlgorithm;
  /** The limit before anything is learnt. Default 20 (clamped into [minLimit, maxLimit]). */
  initialLimit?: number;
  /** The limit never goes below this. Default 1. */
  minLimit?: number;
  /** The limit never goes above this; also the most permits one request may ask for. Default 1000. */
  maxLimit?: number;
  /** The limit is multiplied by this after a window with a dropped lease (above 0.4, at most 1). Default 0.9. */
  backoffRatio?: number;
  /** Leases are learnt from in windows at least this long. Default 100 ms. */
  window?: Duration;
  /** …holding at least this many released leases (or ten windows long). Default 10. */
  minSamples?: number;
  /** gradient: latency may reach this multiple of the no-load latency before the limit is cut. Default 1.25. */
  tolerance?: number;
  /** gradient: the share of each cut applied per window, (0, 1]. Default 0.2. */
  smoothing?: number;
  /** gradient, vegas: the limit held while the no-load latency is measured. Default min(3, maxLimit), ≥ minLimit. */
  probeLimit?: number;
  /** gradient, vegas: windows measured per probe. Default 2. */
  probeWindows?: number;
  /** gradient, vegas: time between scheduled probes of the no-load latency. Default 30 s. */
  probeInterval?: Duration;
  /**
   * gradient, vegas: congested windows in a row after which the no-load latency is probed early (the dependency
   * itself got slower). Default 10.
   */
  shiftWindows?: number;
  /** aimd: a window whose mean latency is above this counts as a drop. Default: none (drops only). */
  timeout?: Duration;
  /** A waiter never waits longer than this once the queue has stood for `queueInterval`. Default 5 ms. */
  targetDelay?: Duration;
  /** A waiter never waits longer than this; and a queue not empty for this long is standing. Default 100 ms. */
  queueInterval?: Duration;
  /** Priority classes: a share of the limit reserved per class, e.g. `{ reserve: { critical: 0.2 } }`. */
  classes?: {
    reserve?: Partial<Record<'critical' | 'default' | 'sheddable', number>> & Record<string, number>;
  };
  /**
   * The event loop: samples overlapping a stall (a GC pause) are not learnt from, and the optional brake admits
   * only critical requests while the loop is overloaded. Default on (stall discount, no brake) with the default
   * clock; off with an injected clock unless a `monitor` on that clock is given. `false` turns it off.
   */
  eventLoop?:
    | boolean
    | {
        /** Where stalls and delay come from. Default: the process-wide `perf_hooks` monitor. */
        monitor?: EventLoopMonitor;
        /** Brake above this event-loop delay (p99 over 100 ms), ms. Default: no brake on delay. */
        maxDelay?: Duration;
        /** Brake above this event-loop utilisation, 0–1. Default: no brake on utilisation. */
        maxUtilization?: number;
      };
  /** Called after each change of the limit (a plain limiter's, or any partition's). */
  onLimitChange?: (limit: number, previous: number) => void;
  /** The clock, ms, monotonic. Default `performance.now()`. */
  clock?: Clock;
}

/** Every option name `adaptiveConcurrency` knows, for the unknown-name check. */
export const ADAPTIVE_OPTION_NAMES = [
  'algorithm',
  'initialLimit',
  'minLimit',
  'maxLimit',
  'backoffRatio',
  'window',
  'minSamples',
  'tolerance',
  'smoothing',
  'probeLimit',
  'probeWindows',
  'probeInterval',
  'shiftWindows',
  'timeout',
  'targetDelay',
  'queueInterval',
  'queueLimit',
  'queueOrder',
  'classes',
  'eventLoop',
  'onLimitChange',
  'clock',
] as const;

const ALGORITHMS: readonly AdaptiveAlgorithm[] = ['gradient', 'vegas', 'aimd'];
const WHERE = 'adaptiveConcurrency';

/** The validated options: the core's, the adaptive settings, and the bounds. */
export interface ResolvedAdaptive {
  readonly core: CoreOptions;
  readonly settings: AdaptiveSettings;
  readonly initialLimit: number;
  readonly maxLimit: number;
  /** A signature of the numeric settings (hooks and monitors make each limiter its own anyway). */
  readonly describe: string;
}

/** Validates `options`; a TypeError/RangeError names the option and the value. */
export function resolveAdaptive(options: AdaptiveConcurrencyOptions | undefined): ResolvedAdaptive {
  const o = object(`${WHERE} options`, options ?? {});
  rejectUnknown(WHERE, o, ADAPTIVE_OPTION_NAMES);
  const algorithm = oneOf(`${WHERE}: algorithm`, o.algorithm, ALGORITHMS, 'gradient');
  const maxLimit = o.maxLimit === undefined ? 1000 : integer(`${WHERE}: maxLimit`, o.maxLimit, 1);
  const minLimit = o.minLimit === undefined ? 1 : integer(`${WHERE}: minLimit`, o.minLimit, 1, maxLimit);
  const initialLimit =
    o.initialLimit === undefined
      ? Math.min(maxLimit, Math.max(minLimit, 20))
      : integer(`${WHERE}: initialLimit`, o.initialLimit, minLimit, maxLimit);
  const backoffRatio = ratio('backoffRatio', o.backoffRatio, 0.9, 0.4, 1, true);
  const windowMs = o.window === undefined ? 100 : parseDuration(`${WHERE}: window`, o.window);
  const minSamples = o.minSamples === undefined ? 10 : integer(`${WHERE}: minSamples`, o.minSamples, 1);
  const tolerance = o.tolerance === undefined ? 1.25 : finite('tolerance', o.tolerance, 1, false);
  const smoothing = ratio('smoothing', o.smoothing, 0.2, 0, 1, true);
  const probeLimit =
    o.probeLimit === undefined
      ? Math.max(minLimit, Math.min(3, maxLimit))
      : integer(`${WHERE}: probeLimit`, o.probeLimit, minLimit, maxLimit);
  const probeWindows =
    o.probeWindows === undefined ? 2 : integer(`${WHERE}: probeWindows`, o.probeWindows, 1);
  const probeIntervalMs =
    o.probeInterval === undefined ? 30_000 : parseDuration(`${WHERE}: probeInterval`, o.probeInterval);
  const shiftWindows =
    o.shiftWindows === undefined ? 10 : integer(`${WHERE}: shiftWindows`, o.shiftWindows, 1);
  const timeoutMs =
    o.timeout === undefined ? Number.POSITIVE_INFINITY : parseDuration(`${WHERE}: timeout`, o.timeout);
  const targetDelayMs =
    o.targetDelay === undefined ? 5 : parseDuration(`${WHERE}: targetDelay`, o.targetDelay);
  const intervalMs =
    o.queueInterval === undefined ? 100 : parseDuration(`${WHERE}: queueInterval`, o.queueInterval);
  if (targetDelayMs > intervalMs) {
    throw new RangeError(
      `${WHERE}: targetDelay (${targetDelayMs} ms) must not be longer than queueInterval (${intervalMs} ms)`,
    );
  }
  if (o.classes !== undefined) {
    object(`${WHERE}: classes`, o.classes);
    rejectUnknown(`${WHERE}: classes`, o.classes, ['reserve']);
  }
  const classes = new PriorityClasses(`${WHERE}: classes`, o.classes?.reserve);
  if (o.onLimitChange !== undefined && typeof o.onLimitChange !== 'function') {
    throw new TypeError(
      `${WHERE}: onLimitChange must be a function (limit, previous) => void; got ${describe(o.onLimitChange)}`,
    );
  }
  const core = queueAndClock(WHERE, o);
  const loop = eventLoop(o.eventLoop, core.clock === performanceClock && o.clock === undefined);
  if (algorithm === 'aimd') {
    for (const name of [
      'tolerance',
      'smoothing',
      'probeLimit',
      'probeWindows',
      'probeInterval',
      'shiftWindows',
    ] as const) {
      if (o[name] !== undefined) throw new TypeError(`${WHERE}: ${name} does not apply to algorithm 'aimd'`);
    }
  } else if (o.timeout !== undefined) {
    throw new TypeError(`${WHERE}: timeout applies to algorithm 'aimd' only; got algorithm '${algorithm}'`);
  }
  const bounds = { initialLimit, minLimit, maxLimit, backoffRatio };
  const probe = { probeLimit, probeWindows, probeIntervalMs, shiftWindows };
  let createLimit: () => Limit;
  if (algorithm === 'gradient')
    createLimit = () => new GradientLimit({ ...bounds, ...probe, tolerance, smoothing });
  else if (algorithm === 'vegas') createLimit = () => new VegasLimit({ ...bounds, ...probe });
  else createLimit = () => new AimdLimit({ ...bounds, timeoutMs });
  return {
    core,
    initialLimit: Math.floor(createLimit().limit),
    maxLimit,
    describe: [
      algorithm,
      initialLimit,
      minLimit,
      maxLimit,
      backoffRatio,
      windowMs,
      minSamples,
      tolerance,
    ].join(':'),
    settings: {
      createLimit,
      windowMs,
      minSamples,
      classes,
      targetDelayMs,
      intervalMs,
      monitor: loop.monitor,
      maxEventLoopDelayMs: loop.maxDelayMs,
      maxEventLoopUtilization: loop.maxUtilization,
      onLimitChange: o.onLimitChange,
    },
  };
}

/** The priority option of an acquisition, checked. */
export type { Priority };

function eventLoop(
  value: AdaptiveConcurrencyOptions['eventLoop'],
  defaultClock: boolean,
): { monitor: EventLoopMonitor | undefined; maxDelayMs: number; maxUtilization: number } {
  const off = {
    monitor: undefined,
    maxDelayMs: Number.POSITIVE_INFINITY,
    maxUtilization: Number.POSITIVE_INFINITY,
  };
  if (value === false) return off;
  if (value === undefined || value === true) {
    if (value === true && !defaultClock) {
      throw new TypeError(
        `${WHERE}: eventLoop: true needs the default clock; with an injected clock give eventLoop.monitor on that clock`,
      );
    }
    return defaultClock ? { ...off, monitor: eventLoopMonitor() } : off;
  }
  object(`${WHERE}: eventLoop`, value);
  rejectUnknown(`${WHERE}: eventLoop`, value, ['monitor', 'maxDelay', 'maxUtilization']);
  const monitor = value.monitor;
  if (
    monitor !== undefined &&
    (typeof monitor !== 'object' ||
      monitor === null ||
      typeof monitor.stalledSince !== 'function' ||
      typeof monitor.delayMs !== 'function' ||
      typeof monitor.utilization !== 'function')
  ) {
    throw new TypeError(
      `${WHERE}: eventLoop.monitor must have stalledSince(), delayMs() and utilization(); got ${describe(monitor)}`,
    );
  }
  if (monitor === undefined && !defaultClock) {
    throw new TypeError(`${WHERE}: eventLoop needs a monitor on the injected clock (eventLoop.monitor)`);
  }
  return {
    monitor: monitor ?? eventLoopMonitor(),
    maxDelayMs:
      value.maxDelay === undefined
        ? Number.POSITIVE_INFINITY
        : parseDuration(`${WHERE}: eventLoop.maxDelay`, value.maxDelay),
    maxUtilization:
      value.maxUtilization === undefined
        ? Number.POSITIVE_INFINITY
        : ratio('eventLoop.maxUtilization', value.maxUtilization, 1, 0, 1, true),
  };
}

function ratio(
  name: string,
  value: unknown,
  fallback: number,
  min: number,
  max: number,
  inclusive: boolean,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !(value > min && (inclusive ? value <= max : value < max))) {
    throw new RangeError(
      `${WHERE}: ${name} must be a number above ${min} and at most ${max}; got ${describe(value)}`,
    );
  }
  return value;
}

function finite(name: string, value: unknown, min: number, inclusive: boolean): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || (inclusive ? value < min : value <= min)) {
    throw new RangeError(`${WHERE}: ${name} must be a finite number above ${min}; got ${describe(value)}`);
  }
  return value;
}
