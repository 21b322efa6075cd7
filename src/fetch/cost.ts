import { describe } from '../duration.ts';
import type { Lease } from '../limiters/lease.ts';
import { rejectUnknown } from '../options/known.ts';

/**
 * The cost of a call, for a limiter that counts cost (`unit: 'tokens'`…): each call asks for an estimate and is
 * settled at the real cost its response reports (`lease.settle`).
 */
export interface CostOptions {
  /** The estimate of a call, in the limiter's unit: the permits it asks for. A whole number ≥ 0. */
  estimate: (url: URL, init: RequestInit | undefined) => number;
  /**
   * The real cost, read from the response — a clone, read beside the caller's body as it arrives (see `llmUsage`,
   * `jsonUsage`, `sseUsage`). `undefined`, a rejection or a bad number keep the estimate. Without it, every call
   * keeps its estimate.
   */
  actual?: (response: Response) => number | undefined | PromiseLike<number | undefined>;
}

/** Validated {@link CostOptions}; `R` is what the estimate is asked of (a fetch's `init`, undici's options). */
export interface CostConfig<R = RequestInit | undefined> {
  estimate: (url: URL, request: R) => number;
  actual: ((response: Response) => number | undefined | PromiseLike<number | undefined>) | undefined;
}

const NAMES = ['estimate', 'actual'] as const;

/** `cost` checked: a TypeError naming the option and the value. */
export function costConfig<R = RequestInit | undefined>(
  kind: string,
  cost: unknown,
  timeBased: boolean | undefined,
): CostConfig<R> | undefined {
  if (cost === undefined) return undefined;
  if (cost === null || typeof cost !== 'object') {
    throw new TypeError(`${kind}: cost must be an object { estimate, actual? }; got ${describe(cost)}`);
  }
  rejectUnknown(`${kind}: cost`, cost, NAMES);
  const { estimate, actual } = cost as Partial<CostConfig<R>>;
  if (typeof estimate !== 'function') {
    throw new TypeError(
      `${kind}: cost.estimate must be a function (url, request) => number; got ${describe(estimate)}`,
    );
  }
  if (actual !== undefined && typeof actual !== 'function') {
    throw new TypeError(
      `${kind}: cost.actual must be a function (response) => number; got ${describe(actual)}`,
    );
  }
  if (timeBased === false) {
    throw new TypeError(
      `${kind}: cost needs a time-based limiter (tokenBucket, fixedWindow, slidingWindow): a concurrency limiter's permits are not a cost`,
    );
  }
  return { estimate, actual };
}

/** The estimate of a call, or a RangeError naming `kind` and the value. */
export function estimateOf<R>(kind: string, cost: CostConfig<R>, url: URL, request: R): number {
  const estimate = cost.estimate(url, request);
  if (typeof estimate !== 'number' || !Number.isInteger(estimate) || estimate < 0) {
    throw new RangeError(
      `${kind}: cost.estimate() must return a whole number ≥ 0; got ${describe(estimate)}`,
    );
  }
  return estimate;
}

/**
 * Settles `lease` at the cost `cost.actual` reads from a clone of `response`, once it has read it; keeps the
 * estimate when it reports none. Never throws: the caller's response is not its business.
 */
export function settleFrom(cost: CostConfig<never>, response: Response, lease: Lease): void {
  if (cost.actual === undefined || !lease.granted) return;
  let copy: Response;
  try {
    copy = response.clone();
  } catch {
    return; // A body already used: nothing to read.
  }
  settleWith(cost, copy, lease);
}

/**
 * Settles `lease` at what `cost.actual` reads from `copy` (a response of its own, read beside the caller's);
 * keeps the estimate when it reports none, throws or rejects. Cancels what the reader left unread.
 */
export function settleWith(cost: CostConfig<never>, copy: Response, lease: Lease): void {
  const actual = cost.actual;
  if (actual === undefined || !lease.granted) return;
  Promise.resolve()
    .then(() => actual(copy))
    .then((cost) => {
      if (cost !== undefined && lease.unsettleable() === undefined) lease.settle(cost);
    })
    .catch(() => {})
    // A reader that stopped early (or never read): its branch of the body would otherwise fill with the rest.
    .finally(() => copy.body?.cancel().catch(() => {}));
}
