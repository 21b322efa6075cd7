import { Lockout } from '../algorithms/lockout.ts';
import { type Duration, describe, parseDuration } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import { type Clock, LimiterCore } from './core.ts';
import type { Lease, RejectionReason } from './lease.ts';
import { duration, integer, object, queueAndClock } from './options.ts';
import { DEFAULT_RANK } from './priority.ts';
import { RateLimiter } from './rate-limiter.ts';

/** Options of {@link lockout}. */
export interface LockoutOptions {
  /** Failures that lock the key out: the Nth is answered as the route answers it, the next is refused. */
  failures: number;
  /** The window failures are counted in, from the first: fewer than `failures` in it are forgotten. */
  within: Duration;
  /** How long the first lockout lasts. */
  lockFor: Duration;
  /**
   * How much longer each further lockout lasts while the key is remembered (see `memory`). Default 1: every
   * lockout lasts `lockFor`.
   */
  factor?: number;
  /** The longest lockout. Required when `factor` > 1 (a growing lockout needs a ceiling); default `lockFor`. */
  maxLockFor?: Duration;
  /**
   * How long after a lockout ends the next one still grows; past it, the next lockout lasts `lockFor` again.
   * Default `maxLockFor`.
   */
  memory?: Duration;
  /** The clock, in milliseconds, monotonic. Default `performance.now()`. */
  clock?: Clock;
}

/** Every option name of {@link LockoutOptions}: any other is refused. */
export const LOCKOUT_OPTION_NAMES = [
  'failures',
  'within',
  'lockFor',
  'factor',
  'maxLockFor',
  'memory',
  'clock',
] as const satisfies readonly (keyof LockoutOptions)[];

/**
 * Locks a client out after repeated failures, for longer each time: after `failures` failures within `within`,
 * every request is refused (`reason: 'locked'`, `retryAfterMs` the time left) for `lockFor`; each further
 * lockout within `memory` of the end of the last lasts `factor` times longer, up to `maxLockFor`.
 *
 * Every granted request counts as a failure until it is refunded: a success, as the route defines it
 * (`skipSuccessfulRequests: true` over HTTP; `lease.refund()` by hand), clears the failures and the growth, and
 * lifts the lockout if that very request started it. Use it in `partitioned` (one lockout per username, per
 * address…) and in `chain`, like any limiter.
 */
export class LockoutLimiter extends RateLimiter {
  declare readonly algorithm: Lockout;
  /** @internal */
  declare readonly core: LockoutCore;

  constructor(options: LockoutOptions) {
    object('lockout options', options);
    rejectUnknown('lockout', options, LOCKOUT_OPTION_NAMES);
    const failures = integer('lockout: failures', options.failures, 1);
    const within = duration('lockout: within', options.within);
    const lockFor = duration('lockout: lockFor', options.lockFor);
    const factor = options.factor === undefined ? 1 : options.factor;
    if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1) {
      throw new RangeError(`lockout: factor must be a finite number ≥ 1; got ${describe(options.factor)}`);
    }
    if (options.maxLockFor === undefined && factor > 1) {
      throw new TypeError(
        `lockout: maxLockFor is required when factor (${factor}) is above 1: a lockout that grows needs a ceiling`,
      );
    }
    const maxLockFor =
      options.maxLockFor === undefined ? lockFor : duration('lockout: maxLockFor', options.maxLockFor);
    if (maxLockFor < lockFor) {
      throw new RangeError(
        `lockout: maxLockFor (${describe(options.maxLockFor)}) must not be shorter than lockFor (${describe(options.lockFor)})`,
      );
    }
    const memory =
      options.memory === undefined ? maxLockFor : parseDuration('lockout: memory', options.memory, true);
    const { clock } = queueAndClock('lockout', { clock: options.clock });
    const algorithm = new Lockout(failures, within, lockFor, factor, maxLockFor, memory);
    const core = { queueLimit: 0, queueOrder: 'oldest-first', countRejected: false, clock } as const;
    super(algorithm, core, new LockoutCore(algorithm, core));
  }

  /** Milliseconds left on the lockout, 0 when not locked out. */
  lockedForMs(): number {
    return this.core.lockedFor(0, this.options.clock.now());
  }

  /** Lifts the lockout and forgets the failures and growth behind it: the client starts over. */
  unlock(): void {
    this.core.unlock(0, this.options.clock.now());
  }

  /** @internal Each partition of a partitioned limiter is its own lockout, refused with `'locked'` too. */
  createCore(): LimiterCore {
    return new LockoutCore(this.algorithm, this.options);
  }
}

/** The core of a lockout: a request refused while the key is locked out says so (`'locked'`). */
export class LockoutCore extends LimiterCore {
  declare algorithm: Lockout;

  /** Through {@link reject}: a refusal while locked out says `'locked'`. */
  override decideOne(slot: number, key: string | undefined): Lease {
    return this.tryAcquire(slot, 1, this.options.clock.now(), true, DEFAULT_RANK, key);
  }

  override reject(
    slot: number,
    permits: number,
    now: number,
    reason: RejectionReason,
    rank?: number,
    key?: string,
  ): Lease {
    const o = slot * this.algorithm.width;
    this.algorithm.advance(this.table.states, o, now);
    const locked = reason === 'limit' && this.algorithm.locked(this.table.states, o);
    return super.reject(slot, permits, now, locked ? 'locked' : reason, rank, key);
  }
}

/** A lockout limiter. See {@link LockoutLimiter}. */
export function lockout(options: LockoutOptions): LockoutLimiter {
  return new LockoutLimiter(options);
}
