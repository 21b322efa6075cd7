import { Buffer } from 'node:buffer';
import type { Algorithm } from '../algorithms/algorithm.ts';
import { type Duration, describe, parseDuration } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import type { AdaptiveAcquireOptions } from './adaptive-concurrency.ts';
import { LimiterCore } from './core.ts';
import type { KeyState } from './key-state.ts';
import { keyFor } from './keyed.ts';
import { Lease } from './lease.ts';
import type { LimitShape, MemorySlot } from './limiter.ts';
import { decideNow, MemoryLimiterBase } from './memory-limiter.ts';
import { checkPermits, integer, object, oneOf } from './options.ts';
import type { Priority } from './priority.ts';
import type { LimiterSpec, Statistics } from './rate-limiter.ts';

/** What happens to a new key when `maxPartitions` partitions are live and none can be dropped. */
export type OverflowPolicy = 'reject' | 'shared';

/** Options of {@link partitioned}. */
export interface PartitionedOptions<R> {
  /**
   * The partition key of a resource (a request, a user…). Keep it short: it is stored per partition. Under
   * `rateLimiting` it may return a promise (a session or API-key lookup), which is awaited before deciding;
   * `tryAcquire`/`acquire` called directly need a string.
   */
  key: (resource: R) => string | PromiseLike<string>;
  /** The limiter every partition is built from, or one per key (tiers). Called once per new partition. */
  limiter: LimiterSpec | ((key: string) => LimiterSpec);
  /** The most partitions kept in memory. Default 100 000; at most 4 000 000. */
  maxPartitions?: number;
  /** When full of partitions that cannot be dropped: reject new keys (default), or let them share one bucket. */
  overflow?: OverflowPolicy;
}

/** Every option name of {@link PartitionedOptions}: any other is refused. */
export const PARTITIONED_OPTION_NAMES = [
  'key',
  'limiter',
  'maxPartitions',
  'overflow',
] as const satisfies readonly (keyof PartitionedOptions<unknown>)[];

const MAX_PARTITIONS = 4_000_000; // slot numbers must fit in 22 bits of a small integer
const MAX_SPECS = 256;
const FIRST_SWEEP = 1024;

/** {@link PartitionedLimiter}'s last key while there is none. */
const NO_KEY = Symbol('no key');

/** A partition's code: `slot << 8 | spec index`, or this when the limiter is full and `overflow` is `'reject'`. */
const REJECTED = -1;

/**
 * One limiter state per key, created on first use, stored compactly (a `Map` from key to slot and typed-array
 * columns — no object per partition). Partitions that are back to full with nobody queued are dropped first,
 * since dropping them changes no decision but the phase of their next window; when `maxPartitions` are live
 * and none can be dropped, `overflow` applies. A live key is never reset.
 */
export class PartitionedLimiter<R> extends MemoryLimiterBase {
  /** The partition key of a resource: the `key` option. */
  readonly keyOf: (resource: R) => string | PromiseLike<string>;
  private readonly specOf: (key: string) => LimiterSpec;
  /** The spec every partition is built from, or undefined when it is chosen per key (tiers). */
  readonly spec: LimiterSpec | undefined;
  private readonly map = new Map<string, number>();
  private readonly cores: LimiterCore[] = [];
  private readonly bySignature = new Map<string, number>();
  // A spec seen before keeps its group of partitions even after its limit changed (and its signature with it).
  private readonly bySpec = new WeakMap<LimiterSpec, number>();
  private lastSpec: LimiterSpec | undefined;
  private lastSpecIndex = 0;
  private readonly overflowSlots: number[] = [];
  readonly maxPartitions: number;
  readonly overflow: OverflowPolicy;
  /** Partitions dropped because they were back to full. */
  evictions = 0;
  /** New keys turned away or sent to the shared bucket because the limiter was full. */
  overflows = 0;
  private nextSweepSize = FIRST_SWEEP;
  private noSweepBefore = Number.NEGATIVE_INFINITY;
  private releasesAtSweep = 0;
  // The last key seen and its partition: a client sending a burst (or an attacker on one key) skips the hash
  // lookup. Cleared whenever a partition is dropped.
  // NO_KEY, never a key function's answer, while none is: a key that is not a string never matches.
  private lastKey: string | typeof NO_KEY = NO_KEY;
  private lastCode = 0;
  // Keys locked by `lock(key, duration)` and when each lock ends (clock ms). Undefined while none is, so a
  // decision pays one field read for locks and a partition no byte.
  private locks: Map<string, number> | undefined;
  // Permits `charge` took from concurrency partitions: only `giveBack` and `reset` return them (a lease's
  // release returns its own).
  private charged: Map<string, number> | undefined;

  constructor(options: PartitionedOptions<R>) {
    super();
    object('partitioned options', options);
    rejectUnknown('partitioned', options, PARTITIONED_OPTION_NAMES);
    if (typeof options.key !== 'function') {
      throw new TypeError(
        `partitioned: key must be a function (resource) => string; got ${describe(options.key)}`,
      );
    }
    const limiter = options.limiter;
    this.spec = isSpec(limiter) ? limiter : undefined;
    if (typeof limiter === 'function') this.specOf = limiter;
    else if (isSpec(limiter)) this.specOf = () => limiter;
    else {
      throw new TypeError(
        `partitioned: limiter must be a limiter (fixedWindow(...), …) or a function (key) => limiter; got ${describe(limiter)}`,
      );
    }
    this.keyOf = options.key;
    this.maxPartitions =
      options.maxPartitions === undefined
        ? 100_000
        : integer('partitioned: maxPartitions', options.maxPartitions, 1, MAX_PARTITIONS);
    this.overflow = oneOf('partitioned: overflow', options.overflow, ['reject', 'shared'], 'reject');
  }

  /** Partitions live now. */
  get size(): number {
    return this.map.size;
  }

  /** What its header fields say, when every key has the same limiter; undefined with tiers. */
  /** What one permit is: its limiter's `unit` (`'requests'` when chosen per key). */
  get unit(): string {
    return this.spec?.options.unit ?? 'requests';
  }

  get shape(): LimitShape | undefined {
    return this.spec?.algorithm;
  }

  shapeFor(key: string): LimitShape {
    return this.algorithmFor(key);
  }

  /**
   * Whether a partition may queue. Built from one spec, read through that spec; one that chooses a spec per key
   * (tiers) is assumed to, since any key's tier might.
   */
  get mayQueue(): boolean {
    return this.spec === undefined || this.spec.options.queueLimit > 0;
  }

  /**
   * Decides now for `resource`'s partition and never waits. `priority` is the request's class: it is not granted
   * past waiters of a higher class in the partition's queue (an `adaptiveConcurrency()` one also sheds by class).
   */
  tryAcquire(resource: R, permits = 1, priority?: Priority): Lease {
    const key = keyFor(this, resource);
    // The commonest call — the key decided last (a client's burst, an attacker's key), one permit, no class, no
    // lock — goes straight to its core's one-permit step, small enough to be inlined whole into the caller.
    if (permits !== 1 || priority !== undefined || this.locks !== undefined) {
      return this.tryAcquireFor(key, permits, true, priority);
    }
    if (key === this.lastKey) return this.cores[this.lastCode & 255].decideOne(this.lastCode >>> 8, key);
    return this.decideOneFor(key);
  }

  /**
   * Decides now for the partition of `key` (already computed, e.g. awaited by the HTTP layer). The base's
   * template, without the partition object a chain needs: the commonest HTTP route decides here.
   */
  override tryAcquireFor(
    key: string | undefined,
    permits = 1,
    refundable = true,
    priority?: Priority,
  ): Lease {
    if (this.locks !== undefined) {
      const locked = this.lockedFor(key as string, permits);
      if (locked !== undefined) return locked;
    }
    const code = this.codeOf(key as string);
    if (code === REJECTED) return this.overflowLease(key as string, permits);
    return decideNow(this.cores[code & 255], code >>> 8, key, permits, refundable, priority);
  }

  /** {@link tryAcquire} of one permit for a key other than the last (out of line: the inlining budget). */
  private decideOneFor(key: string): Lease {
    const code = this.lookUp(key);
    if (code === REJECTED) return this.overflowLease(key, 1);
    return this.cores[code & 255].decideOne(code >>> 8, key);
  }

  /**
   * Grants now, or waits in the partition's queue while there is room, or rejects at once. `options.priority`
   * as for {@link tryAcquire}.
   */
  acquire(resource: R, permits = 1, options?: AdaptiveAcquireOptions): Promise<Lease> {
    return this.acquireOf(resource, undefined, permits, options?.signal, options?.priority);
  }

  /** The partition's permits available and queued now (a fresh one if it is not live), and the totals of all. */
  statistics(resource: R): Statistics {
    let granted = 0;
    let rejected = 0;
    for (const core of this.cores) {
      granted += core.granted;
      rejected += core.rejected;
    }
    const key = keyFor(this, resource);
    const code = this.map.get(key);
    if (code === undefined) {
      const spec = this.specOf(key);
      return { available: spec.algorithm.limit, queued: 0, granted, rejected };
    }
    const core = this.cores[code & 255];
    const { available, queued } = core.peek(code >>> 8, core.options.clock.now());
    return { available, queued, granted, rejected };
  }

  /** The partition of `key`, created if new; the overflow lease when the limiter is full and rejects new keys. */
  bind(key: string | undefined, permits: number): MemorySlot | Lease {
    if (this.locks !== undefined) {
      const locked = this.lockedFor(key as string, permits);
      if (locked !== undefined) return locked;
    }
    const code = this.codeOf(key as string);
    if (code === REJECTED) return this.overflowLease(key as string, permits);
    return { core: this.cores[code & 255], slot: code >>> 8, key };
  }

  /** Permits available now in the partition of `key` (a fresh one's when it is not live). */
  available(key: string | undefined): number {
    const code = this.map.get(key as string);
    if (code === undefined) return this.specOf(key as string).algorithm.limit;
    const core = this.cores[code & 255];
    return core.peek(code >>> 8, core.options.clock.now()).available;
  }

  /**
   * What a request for `key` would meet now: its limit, permits remaining, time until full, time left on a lock,
   * permits queued. Undefined for a key never seen (or dropped since, being back to full) and not locked.
   * Synchronous, no allocation beyond the answer.
   */
  state(key: string): KeyState | undefined {
    checkKey('partitioned.state', key);
    const lockedForMs = this.lockLeft(key);
    const code = this.map.get(key);
    if (code === undefined) {
      if (lockedForMs === 0) return undefined;
      const limit = this.specOf(key).algorithm.limit;
      return { limit, remaining: limit, resetAfterMs: 0, lockedForMs, queued: 0 };
    }
    const core = this.cores[code & 255];
    const now = core.options.clock.now();
    // The longer of an administrator's lock and the limiter's own (a lockout() after repeated failures).
    const own = core.lockedFor(code >>> 8, now);
    return { ...core.inspect(code >>> 8, now), lockedForMs: Math.max(lockedForMs, own) };
  }

  /**
   * Forgets `key`, as if never seen: its lock ends, its window or bucket starts afresh (grants made before can
   * no longer refund into it) and its waiters that now fit are served. A concurrency partition keeps the
   * permits its leases hold (they come back by their release: never more than the limit at once) and returns
   * those `charge` took. Nothing for an unknown key.
   */
  reset(key: string): void {
    checkKey('partitioned.reset', key);
    this.endLock(key);
    const code = this.map.get(key);
    if (code === undefined) return;
    const core = this.cores[code & 255];
    const slot = code >>> 8;
    const now = core.options.clock.now();
    const charged = this.charged?.get(key);
    if (charged !== undefined) {
      this.charged!.delete(key);
      core.giveBack(slot, charged, now);
    }
    core.restart(slot, now);
    if (core.isIdle(slot, now)) this.drop(code, key);
  }

  /**
   * Locks `key` for `duration` (replacing any lock it has): every request for it is rejected at once with reason
   * `'locked'` and `retryAfterMs` the time left, until the lock ends or {@link unlock}; its queued requests are
   * answered so now. Its window or bucket is left as it is. A key never seen may be locked (its first request
   * meets the lock). A `RangeError`/`TypeError` for a duration that is not positive.
   */
  lock(key: string, duration: Duration): void {
    checkKey('partitioned.lock', key);
    const ms = parseDuration('partitioned.lock: duration', duration);
    const now = this.clockOf(key).now();
    if (this.locks === undefined) this.locks = new Map();
    else if (this.locks.size >= 1024) this.pruneLocks(now);
    this.locks.set(ownText(key), now + ms);
    const code = this.map.get(key);
    if (code === undefined) return;
    this.cores[code & 255].answerQueued(code >>> 8, (waiter) => this.lockedFor(key, waiter.permits)!);
  }

  /**
   * Ends `key`'s lock now — an administrator's, and a `lockout()`'s own with the failures behind it — and serves
   * its waiters that fit. Nothing when it is not locked.
   */
  unlock(key: string): void {
    checkKey('partitioned.unlock', key);
    this.endLock(key);
    const code = this.map.get(key);
    if (code === undefined) return;
    const core = this.cores[code & 255];
    const now = core.options.clock.now();
    core.unlock(code >>> 8, now);
    if (core.waiting > 0) core.drain(code >>> 8, now);
  }

  /**
   * Takes `permits` from `key`'s partition without a request (a penalty): it may go below zero, so later
   * requests wait longer. On a concurrency limiter they stay taken until {@link giveBack} or {@link reset}.
   * Starts the partition of a key never seen; nothing when the limiter is full and rejects new keys.
   */
  charge(key: string, permits: number): void {
    checkKey('partitioned.charge', key);
    checkCount('partitioned.charge: permits', permits);
    const code = this.codeOf(key);
    if (code === REJECTED || permits === 0) return;
    const core = this.cores[code & 255];
    core.charge(code >>> 8, permits, core.options.clock.now());
    if (!core.algorithm.timeBased) {
      if (this.charged === undefined) this.charged = new Map();
      this.charged.set(ownText(key), (this.charged.get(key) ?? 0) + permits);
    }
  }

  /**
   * Gives `permits` back to `key`'s partition without a request (a reward), never past full: into its window (a
   * sliding window's newest segments first) or bucket; on a concurrency limiter, only permits {@link charge}
   * took (a lease's come back by its release). Serves its waiters that now fit. Nothing for an unknown key.
   */
  giveBack(key: string, permits: number): void {
    checkKey('partitioned.giveBack', key);
    checkCount('partitioned.giveBack: permits', permits);
    const code = this.map.get(key);
    if (code === undefined) return;
    const core = this.cores[code & 255];
    let back = permits;
    if (!core.algorithm.timeBased) {
      const charged = this.charged?.get(key) ?? 0;
      back = Math.min(back, charged);
      if (charged - back > 0) this.charged!.set(key, charged - back);
      else this.charged?.delete(key);
    }
    core.giveBack(code >>> 8, back, core.options.clock.now());
  }

  /**
   * The rejection a request of `permits` for a locked `key` gets, or undefined when `key` is not locked (an
   * ended lock is forgotten here).
   *
   * @internal Read by chains at a waiter's admission.
   */
  lockedFor(key: string, permits: number): Lease | undefined {
    const until = this.locks?.get(key);
    if (until === undefined) return undefined;
    const clock = this.clockOf(key);
    const now = clock.now();
    if (until <= now) {
      this.endLock(key);
      return undefined;
    }
    const code = this.map.get(key);
    const { algorithm, options } = code === undefined ? this.specOf(key) : this.cores[code & 255];
    checkPermits(permits, algorithm.limit, options.overdraw, this);
    const state = code === undefined ? undefined : this.cores[code & 255].inspect(code >>> 8, now);
    return Lease.rejected('locked', {
      retryAfterMs: until - now,
      limit: algorithm.limit,
      remaining: state === undefined ? algorithm.limit : state.remaining,
      resetAfterMs: state === undefined ? 0 : state.resetAfterMs,
      source: this,
      key,
    });
  }

  /** Milliseconds left on `key`'s lock; 0 when none. */
  private lockLeft(key: string): number {
    const until = this.locks?.get(key);
    if (until === undefined) return 0;
    const left = until - this.clockOf(key).now();
    if (left > 0) return left;
    this.endLock(key);
    return 0;
  }

  private endLock(key: string): void {
    if (this.locks === undefined) return;
    this.locks.delete(key);
    if (this.locks.size === 0) this.locks = undefined;
  }

  private pruneLocks(now: number): void {
    for (const [key, until] of this.locks!) if (until <= now) this.locks!.delete(key);
  }

  /** The clock `key`'s partition is decided on. */
  private clockOf(key: string): { now(): number } {
    const code = this.map.get(key);
    if (code !== undefined) return this.cores[code & 255].options.clock;
    return this.specOf(key).options.clock;
  }

  /** Drops the live partition `code` of `key` (back to full, nobody queued). */
  private drop(code: number, key: string): void {
    const index = code & 255;
    const slot = code >>> 8;
    this.map.delete(key);
    this.cores[index].free(slot);
    this.lastKey = NO_KEY;
  }

  /** The partition of `key` as `slot << 8 | spec index`, created if new; `REJECTED` when full. */
  private codeOf(key: string): number {
    // The cache holds a string or NO_KEY: a key that is not a string (a header the client did not send) never
    // matches it, so it can never be handed the partition of whoever was decided last; lookUp refuses it.
    if (key === this.lastKey) return this.lastCode;
    return this.lookUp(key);
  }

  /** {@link codeOf} of a key other than the last one. */
  private lookUp(key: string): number {
    // The type first: a key that is not a string (a header the client did not send) must never be stored.
    if (typeof key !== 'string') throw notAString(key);
    const code = this.map.get(key);
    if (code === undefined) return this.create(key);
    this.lastKey = key;
    this.lastCode = code;
    return code;
  }

  /** The algorithm that decides (or would decide) `key`'s partition. */
  algorithmFor(key: string): Algorithm {
    const code = this.map.get(key);
    if (code !== undefined) return this.cores[code & 255].algorithm;
    return this.specOf(key).algorithm;
  }

  private create(key: string): number {
    const index = this.specIndex(key);
    const core = this.cores[index];
    const now = core.options.clock.now();
    if (!this.hasRoom(now)) {
      this.overflows++;
      if (this.overflow === 'reject') return REJECTED;
      let slot = this.overflowSlots[index];
      if (slot === undefined) slot = this.overflowSlots[index] = core.allocate(now);
      return (slot << 8) | index;
    }
    const slot = core.allocate(now);
    // A key cut from a request (an address out of a 15 KB X-Forwarded-For) is a view of the whole header in V8:
    // stored as is, every partition would keep its request's header alive. A stored key owns its text.
    const own = ownText(key);
    const code = (slot << 8) | index;
    this.map.set(own, code);
    return code;
  }

  private specIndex(key: string): number {
    const spec = this.specOf(key);
    if (!isSpec(spec)) {
      throw new TypeError(
        `partitioned: limiter(${JSON.stringify(key)}) must return a limiter; got ${describe(spec)}`,
      );
    }
    if (spec === this.lastSpec) return this.lastSpecIndex;
    let index = this.bySpec.get(spec);
    if (index !== undefined) return this.remember(spec, index);
    // Limiters of equal settings share one group (a tiers function may build a new limiter per key); a group
    // whose limit changed since is no longer one of equal settings.
    index = this.bySignature.get(spec.signature);
    if (index !== undefined && this.cores[index].signature === spec.signature) {
      spec.attach?.(this.cores[index]);
      this.bySpec.set(spec, index);
      return this.remember(spec, index);
    }
    if (this.cores.length === MAX_SPECS) {
      throw new RangeError(
        `partitioned: limiter() returned more than ${MAX_SPECS} distinct limiter settings`,
      );
    }
    index = this.cores.length;
    const core = spec.createCore?.() ?? new LimiterCore(spec.algorithm, spec.options);
    core.source = this;
    spec.attach?.(core);
    this.cores.push(core);
    this.bySignature.set(spec.signature, index);
    this.bySpec.set(spec, index);
    return this.remember(spec, index);
  }

  /** The last spec asked for and its group: one spec for every key is the usual case. */
  private remember(spec: LimiterSpec, index: number): number {
    this.lastSpec = spec;
    this.lastSpecIndex = index;
    return index;
  }

  /**
   * Whether a new partition fits. Sweeps for droppable partitions when the map has doubled since the last sweep
   * (so memory follows the live set, amortised O(1) per new key) or when full; a full sweep that freed too little
   * waits until more partitions can have refilled, so a flood of new keys cannot make every request O(n).
   */
  private hasRoom(now: number): boolean {
    const size = this.map.size;
    if (size < this.nextSweepSize && size < this.maxPartitions) return true;
    if (size >= this.maxPartitions && now < this.noSweepBefore && this.releases() === this.releasesAtSweep) {
      return false;
    }
    this.sweep(now);
    this.nextSweepSize = Math.max(FIRST_SWEEP, this.map.size * 2);
    return this.map.size < this.maxPartitions;
  }

  private sweep(now: number): void {
    this.lastKey = NO_KEY;
    const waits: number[] = [];
    // The map is walked (deleting while iterating is allowed): no slot-to-key column, which cost 8-12 bytes a
    // partition, is kept for sweeps alone.
    for (const [key, code] of this.map) {
      const core = this.cores[code & 255];
      const slot = code >>> 8;
      if (core.isIdle(slot, now)) {
        this.map.delete(key);
        core.free(slot);
        this.evictions++;
      } else if (waits.length < 4096) {
        const wait = core.resetAfter(slot, now);
        if (!Number.isNaN(wait)) waits.push(wait);
      }
    }
    // Sweep again once an eighth of the sampled partitions can have refilled.
    waits.sort((a, b) => a - b);
    this.noSweepBefore = waits.length === 0 ? now : now + waits[Math.floor(waits.length / 8)];
    this.releasesAtSweep = this.releases();
  }

  private releases(): number {
    let total = 0;
    for (const core of this.cores) total += core.releases;
    return total;
  }

  /** The lease of a new key turned away because the limiter is full. */
  private overflowLease(key: string, permits: number): Lease {
    const spec = this.specOf(key);
    checkPermits(permits, spec.algorithm.limit, spec.options.overdraw, this);
    const now = spec.options.clock.now();
    const wait = Math.max(0, this.noSweepBefore - now);
    return Lease.rejected('overflow', {
      retryAfterMs: spec.algorithm.timeBased ? wait : undefined,
      limit: spec.algorithm.limit,
      remaining: 0,
      source: this,
      key,
    });
  }
}

/** Partitions per key, from a key function and a limiter spec (or one spec per key). See {@link PartitionedLimiter}. */
export function partitioned<R>(options: PartitionedOptions<R>): PartitionedLimiter<R> {
  return new PartitionedLimiter(options);
}

/**
 * A copy of `text` that refers to no other string, flat. V8 copies substrings shorter than 13 characters; a
 * longer one is a slice of its parent (a 15 KB header kept alive by a 36-character key). Slicing again does not
 * help: `' ' + text` flattened then sliced is a 32-byte slice object over a flat copy (measured: 117 bytes a
 * partition at 1 M keys against 85 for a flat key). Text written to bytes and read back is one new flat string;
 * a string that does not survive the round trip (a lone surrogate) is copied the slicing way instead.
 *
 * @internal Exported for the tests and the `pk` cache.
 */
export function ownText(text: string): string {
  if (text.length < 13) return text;
  if (text.length * 3 > scratch.length) scratch = Buffer.allocUnsafe(text.length * 3);
  const copy = scratch.toString('utf8', 0, scratch.write(text, 0, 'utf8'));
  return copy === text ? copy : ` ${text}`.slice(1);
}

/** The bytes {@link ownText} writes a key to, grown to the longest key seen. */
let scratch = Buffer.allocUnsafe(256);

/** The TypeError for a key function that returned something other than a string. */
function notAString(key: unknown): TypeError {
  return new TypeError(
    `partitioned: key() must return a string; got ${describe(key)}${isThenable(key) ? ' (async keys are awaited by rateLimiting; call tryAcquire with the awaited key)' : ''}`,
  );
}

function checkKey(where: string, key: unknown): asserts key is string {
  if (typeof key !== 'string') throw new TypeError(`${where}: key must be a string; got ${describe(key)}`);
}

/** A whole number of permits, zero or more, for an administrative charge or give-back. */
export function checkCount(name: string, permits: unknown): asserts permits is number {
  if (typeof permits !== 'number')
    throw new TypeError(`${name} must be a whole number; got ${describe(permits)}`);
  if (!Number.isInteger(permits) || permits < 0) {
    throw new RangeError(`${name} must be a whole number of permits, 0 or more; got ${describe(permits)}`);
  }
}

function isThenable(value: unknown): boolean {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

function isSpec(value: unknown): value is LimiterSpec {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as LimiterSpec).signature === 'string' &&
    typeof (value as LimiterSpec).algorithm === 'object' &&
    typeof (value as LimiterSpec).options === 'object'
  );
}
