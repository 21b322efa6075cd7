import { type Duration, describe, parseDuration } from '../duration.ts';
import type { KeyState } from '../limiters/key-state.ts';
import { keyFor } from '../limiters/keyed.ts';
import type { Lease } from '../limiters/lease.ts';
import type { LimitShape, StoredLimiter } from '../limiters/limiter.ts';
import { checkCount } from '../limiters/partitioned.ts';
import type { Priority } from '../limiters/priority.ts';
import type { AcquireOptions, LimiterSpec, Statistics } from '../limiters/rate-limiter.ts';
import type { RemoteStore } from '../limiters/store.ts';
import { rejectUnknown } from '../options/known.ts';
import type { Waiting } from './acquire.ts';
import { type Binding, type BoundMember, type Owner, ranked } from './binding.ts';
import type { Engine } from './engine.ts';
import { decodeNumber } from './protocol.ts';

export { isUnavailableAnswer } from './unavailable.ts';

/** Options of `store.limiter(spec, options)`. */
export interface RedisLimiterOptions {
  /** The limiter's name: its key in Redis. Processes that use the same name (and settings) share one budget. */
  name: string;
  /** The Redis Cluster hash tag of its key. Default: the name. Members of one chain need the same tag. */
  hashTag?: string;
  /** Leased decisions (windows, token buckets, concurrency): see {@link RedisPartitionedOptions.leases}. Default false. */
  leases?: boolean | 'auto';
}

/** Every option name of {@link RedisLimiterOptions}: any other is refused. */
export const REDIS_LIMITER_OPTION_NAMES = [
  'name',
  'hashTag',
  'leases',
] as const satisfies readonly (keyof RedisLimiterOptions)[];

/** Options of `store.partitioned(options)`. */
export interface RedisPartitionedOptions<R> {
  /** The limiter's name, part of every partition's key. */
  name: string;
  /** The partition key of a resource. Under `rateLimiting` it may return a promise, which is awaited. */
  key: (resource: R) => string | PromiseLike<string>;
  /** The limiter every partition is built from, or one per key (tiers). */
  limiter: LimiterSpec | ((key: string) => LimiterSpec);
  /**
   * The Redis Cluster hash tag of a partition's key. Default: the partition key itself, so limiters partitioned
   * by the same key can be chained; a chain with an unpartitioned member needs a constant tag here.
   */
  hashTag?: (key: string) => string;
  /**
   * Leased decisions, for fixed and sliding windows, token buckets and concurrency: each process takes a batch of
   * permits for a key from Redis in one command (sized to its demand) and decides from it locally until the
   * window — a sliding window's segment — it was taken in ends (a bucket's batch: for a second at most); a key
   * Redis rejected is rejected locally until its retry time. No window ever admits more than the limit across all
   * processes; a token bucket admits over any span at most what it allows plus 1 % of `tokenLimit` (floored), the
   * most all batches may hold together; a concurrency limit's permits held by a process, in use or free, count in
   * Redis until given back or `leaseTtlMs` after the process stops renewing them. `remaining` is the fleet's as
   * this process last heard it. Decided alone only: in a chain a leased limiter is decided on Redis as today.
   * `true` leases every key; `'auto'` (windows and token buckets) only the keys this process decides often (from
   * 100 decisions a second, back to exact decisions after 2 s below 25 a second: docs/redis.md, Automatic
   * leases), the others are decided exactly, one call each. Default false.
   */
  leases?: boolean | 'auto';
}

/** Every option name of {@link RedisPartitionedOptions}: any other is refused. */
export const REDIS_PARTITIONED_OPTION_NAMES = [
  'name',
  'key',
  'limiter',
  'hashTag',
  'leases',
] as const satisfies readonly (keyof RedisPartitionedOptions<unknown>)[];

/** What the limiters share: the engine, the local queues, the key prefix and the test clock. */
export interface Context {
  engine: Engine;
  waiting: Waiting;
  prefix: string;
  /** The store as its limiters name it (`limiter.store`). */
  store: RemoteStore;
}

const SPEC_CACHE = 10_000;
const MAX_LOCK_MS = 1e12;

/**
 * One limiter state in Redis, shared by every process that uses the same name: the async twin of a memory
 * limiter. Same decisions, same `Lease` fields; `tryAcquire` is one round trip.
 */
export class RedisLimiter implements Owner, StoredLimiter {
  granted = 0;
  rejected = 0;
  readonly name: string;
  private readonly member: BoundMember;
  private readonly binding: Binding;

  /** @internal Use `store.limiter(spec, { name })`. */
  constructor(
    /** @internal The store's context: limiters with the same one are on the same store. */
    readonly context: Context,
    readonly spec: LimiterSpec,
    options: RedisLimiterOptions,
  ) {
    checkSpec('store.limiter', spec);
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`store.limiter: options { name } are required; got ${describe(options)}`);
    }
    rejectUnknown('store.limiter', options, REDIS_LIMITER_OPTION_NAMES);
    this.name = checkName('store.limiter: name', options.name);
    const tag =
      options.hashTag === undefined ? undefined : checkName('store.limiter: hashTag', options.hashTag);
    const key =
      tag === undefined ? `${context.prefix}{${this.name}}` : `${context.prefix}{${tag}}${this.name}`;
    // With a test clock, t = 0 is the limiter's creation, as in memory; with Redis TIME, the first request.
    const clock = context.engine.options.clock;
    const leased = checkLeases('store.limiter', options.leases, spec);
    this.member = {
      key,
      spec,
      origin: clock ? String(clock.now()) : '',
      owner: this,
      partKey: undefined,
      leased,
    };
    this.binding = { members: [this.member], partKey: undefined, chain: false };
  }

  /** The most permits one request may ask for. */
  get limit(): number {
    return this.spec.algorithm.limit;
  }

  /** The store that decides it (a Redis store): limiters of one store can be chained. */
  get store(): RemoteStore {
    return this.context.store;
  }

  /** What its header fields say: its algorithm's limit and window. */
  get shape(): LimitShape {
    return this.spec.algorithm;
  }

  /** What one permit is: its limiter's `unit`. */
  get unit(): string {
    return this.spec.options.unit ?? 'requests';
  }

  shapeFor(_key: string): LimitShape {
    return this.spec.algorithm;
  }

  /** Whether a request may wait here for its turn to ask Redis again (`queueLimit` > 0). */
  get mayQueue(): boolean {
    return this.spec.options.queueLimit > 0;
  }

  /**
   * Decides now and never waits: one round trip. `priority` is the request's class, for a limiter with priority
   * classes (`concurrency({ classes })`): the shares reserved above it hold across every process.
   */
  tryAcquire(permits = 1, priority?: Priority): Promise<Lease> {
    let binding: Binding;
    try {
      binding = ranked(this.binding, priority);
      this.context.engine.check(binding, permits);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.context.engine.decideLease(binding, permits, 'limit');
  }

  /**
   * Grants now, or waits locally (bounded by `queueLimit`, abortable) and asks again when a retry can succeed.
   * `options.priority`: the request's class (see {@link tryAcquire}); a waiter here is served before the ones of
   * lower classes.
   */
  async acquire(permits = 1, options?: AcquireOptions): Promise<Lease> {
    return this.context.waiting.acquire(ranked(this.binding, options?.priority), permits, options?.signal);
  }

  /** Permits available in Redis now; queued here; granted and rejected by this process. */
  async statistics(): Promise<Statistics> {
    const [available] = await this.context.engine.peek(this.binding);
    const queued = this.context.waiting.queued(this.binding);
    return { available, queued, granted: this.granted, rejected: this.rejected };
  }

  /**
   * Not on Redis: a Redis limiter's state is shared by every process that uses its name, each sending its own
   * settings with every call, so a change in one process would split them. Always a `TypeError`: deploy new
   * settings (a new Redis limiter built from a limiter with the new limit) instead.
   */
  setLimit(..._args: unknown[]): never {
    throw new TypeError(
      `store.limiter: setLimit is for memory limiters; the settings of a Redis limiter are shared by every process using its name: build a new one with the new settings`,
    );
  }

  /** @internal Its one member (there are no partitions: `resource` is ignored). */
  bind(_resource?: unknown): BoundMember {
    return this.member;
  }
}

/** One limiter state per key in Redis: the async twin of `partitioned`. Keys expire when back to full. */
export class RedisPartitionedLimiter<R> implements Owner, StoredLimiter<R> {
  granted = 0;
  rejected = 0;
  readonly name: string;
  /** The partition key of a resource: the `key` option. */
  readonly keyOf: (resource: R) => string | PromiseLike<string>;
  private readonly specOf: (key: string) => LimiterSpec;
  /** The spec every partition is built from, or undefined when it is chosen per key (tiers). */
  readonly spec: LimiterSpec | undefined;
  private readonly tagOf: ((key: string) => string) | undefined;
  private readonly specs = new Map<string, LimiterSpec>();
  private readonly leases: boolean | 'auto';

  /** @internal Use `store.partitioned(options)`. */
  constructor(
    /** @internal The store's context: limiters with the same one are on the same store. */
    readonly context: Context,
    options: RedisPartitionedOptions<R>,
  ) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`store.partitioned options must be an object; got ${describe(options)}`);
    }
    rejectUnknown('store.partitioned', options, REDIS_PARTITIONED_OPTION_NAMES);
    this.name = checkName('store.partitioned: name', options.name);
    if (typeof options.key !== 'function') {
      throw new TypeError(
        `store.partitioned: key must be a function (resource) => string; got ${describe(options.key)}`,
      );
    }
    if (options.hashTag !== undefined && typeof options.hashTag !== 'function') {
      throw new TypeError(
        `store.partitioned: hashTag must be a function (key) => string; got ${describe(options.hashTag)}`,
      );
    }
    const limiter = options.limiter;
    if (typeof limiter === 'function') this.specOf = limiter;
    else {
      checkSpec('store.partitioned: limiter', limiter);
      this.specOf = () => limiter;
    }
    this.spec = typeof limiter === 'function' ? undefined : limiter;
    this.leases = checkLeases('store.partitioned', options.leases, this.spec);
    this.keyOf = options.key;
    this.tagOf = options.hashTag;
  }

  /** The store that decides it (a Redis store): limiters of one store can be chained. */
  get store(): RemoteStore {
    return this.context.store;
  }

  /** What its header fields say, when every key has the same limiter; undefined with tiers. */
  get shape(): LimitShape | undefined {
    return this.spec?.algorithm;
  }

  /** What one permit is: its limiter's `unit` (`'requests'` when chosen per key). */
  get unit(): string {
    return this.spec?.options.unit ?? 'requests';
  }

  shapeFor(key: string): LimitShape {
    return this.algorithmFor(key);
  }

  /** Whether a partition may queue (assumed with tiers, since any key's tier might). */
  get mayQueue(): boolean {
    return this.spec === undefined || this.spec.options.queueLimit > 0;
  }

  /** Decides now for `resource`'s partition: one round trip. `priority`: the request's class (as a limiter's). */
  tryAcquire(resource: R, permits = 1, priority?: Priority): Promise<Lease> {
    let binding: Binding;
    try {
      binding = ranked(this.binding(resource), priority);
      this.context.engine.check(binding, permits);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.context.engine.decideLease(binding, permits, 'limit');
  }

  /** Grants now, or waits locally in the partition's queue, or rejects at once. `options.priority`: its class. */
  async acquire(resource: R, permits = 1, options?: AcquireOptions): Promise<Lease> {
    const binding = ranked(this.binding(resource), options?.priority);
    return this.context.waiting.acquire(binding, permits, options?.signal);
  }

  /** The partition's permits available in Redis and queued here; this process's totals over all partitions. */
  async statistics(resource: R): Promise<Statistics> {
    const binding = this.binding(resource);
    const [available] = await this.context.engine.peek(binding);
    const queued = this.context.waiting.queued(binding);
    return { available, queued, granted: this.granted, rejected: this.rejected };
  }

  /**
   * Not on Redis: a Redis limiter's state is shared by every process that uses its name, each sending its own
   * settings with every call, so a change in one process would split them. Always a `TypeError`: deploy new
   * settings (a new Redis limiter built from a limiter with the new limit) instead.
   */
  setLimit(..._args: unknown[]): never {
    throw new TypeError(
      `store.partitioned: setLimit is for memory limiters; the settings of a Redis limiter are shared by every process using its name: build a new one with the new settings`,
    );
  }

  /**
   * What a request for `key` would meet now, as Redis holds it: limit, permits remaining, time until full, time
   * left on a lock, and permits queued in this process. Undefined for a key Redis does not hold (never seen, or
   * expired back to full). One round trip, read-only.
   */
  async state(key: string): Promise<KeyState | undefined> {
    const m = this.adminMember('state', key);
    const reply = await this.context.engine.admin(m, 'a', 0, '');
    if (reply === '') return undefined;
    const [remaining, resetAfter, locked] = reply.split(',');
    const queued = this.context.waiting.queued({ members: [m], partKey: key, chain: false });
    return {
      limit: m.spec.algorithm.limit,
      remaining: Number(remaining),
      resetAfterMs: decodeNumber(resetAfter),
      lockedForMs: Number(locked),
      queued,
    };
  }

  /**
   * Forgets `key`, as if never seen, in every process: its state and lock are deleted (a concurrency key keeps
   * the leases its holders have, which come back by their release, and drops what `charge` took). Nothing for
   * an unknown key. One round trip.
   */
  async reset(key: string): Promise<void> {
    await this.administer(this.adminMember('reset', key), 'e', 0, '');
  }

  /**
   * Locks `key` for `duration` in every process (replacing any lock it has): its requests are rejected at once
   * with reason `'locked'` and `retryAfterMs` the time left, until the lock ends (Redis expires it) or
   * {@link unlock}. Its state is kept under the lock. A key never seen may be locked. One round trip.
   */
  async lock(key: string, duration: Duration): Promise<void> {
    const m = this.adminMember('lock', key);
    const ms = Math.ceil(parseDuration('store.partitioned.lock: duration', duration));
    // The lock's end is written as a whole number of milliseconds on Redis's clock, and its key's TTL with it.
    if (ms > MAX_LOCK_MS) {
      throw new RangeError(
        `store.partitioned.lock: duration must be at most ${MAX_LOCK_MS} ms (about 31 years); got ${describe(duration)}`,
      );
    }
    await this.administer(m, 'k', 0, String(ms));
  }

  /** Ends `key`'s lock in every process; nothing when it is not locked. One round trip. */
  async unlock(key: string): Promise<void> {
    await this.administer(this.adminMember('unlock', key), 'u', 0, '');
  }

  /**
   * Takes `permits` from `key` without a request (a penalty; it may go below zero). On a concurrency limiter
   * they are held like a lease nobody renews: they lapse after the store's `leaseTtl` unless given back or
   * reset sooner. Starts a key never seen. One round trip.
   */
  async charge(key: string, permits: number): Promise<void> {
    const m = this.adminMember('charge', key);
    checkCount('store.partitioned.charge: permits', permits);
    if (permits > 0) await this.context.engine.admin(m, 'c', permits, '');
  }

  /**
   * Gives `permits` back to `key` without a request (a reward), never past full (a sliding window's newest
   * segments first); on a concurrency limiter only what {@link charge} took. Nothing for an unknown key. One
   * round trip.
   */
  async giveBack(key: string, permits: number): Promise<void> {
    const m = this.adminMember('giveBack', key);
    checkCount('store.partitioned.giveBack: permits', permits);
    if (permits > 0) await this.administer(m, 'v', permits, '');
  }

  /**
   * One key changed by `op`; the waiters on it in this process ask Redis again now (they may fit, or meet the
   * lock).
   */
  private async administer(
    m: BoundMember,
    op: 'e' | 'k' | 'u' | 'v',
    permits: number,
    arg: string,
  ): Promise<void> {
    await this.context.engine.admin(m, op, permits, arg);
    this.context.waiting.wakeKey(m.key);
  }

  /** `key`'s member for an administrative operation, or a TypeError naming it. */
  private adminMember(operation: string, key: string): BoundMember {
    if (typeof key !== 'string') {
      throw new TypeError(`store.partitioned.${operation}: key must be a string; got ${describe(key)}`);
    }
    return this.member(key);
  }

  /** The algorithm that decides (or would decide) `key`'s partition. */
  algorithmFor(key: string): LimiterSpec['algorithm'] {
    return (this.specs.get(key) ?? this.specOf(key)).algorithm;
  }

  /** @internal The member bound to `resource`'s partition (its `partKey` the partition key). */
  bind(resource: R): BoundMember {
    return this.member(keyFor(this, resource));
  }

  private member(partKey: string): BoundMember {
    if (typeof partKey !== 'string') {
      throw new TypeError(`store.partitioned: key() must return a string; got ${describe(partKey)}`);
    }
    // One spec for every key: no per-key lookup.
    let spec = this.spec ?? this.specs.get(partKey);
    if (spec === undefined) {
      spec = this.specOf(partKey);
      checkSpec(`store.partitioned: limiter(${JSON.stringify(partKey)})`, spec);
      if (this.leases) checkLeases(`store.partitioned: limiter(${JSON.stringify(partKey)})`, true, spec);
      if (this.specs.size >= SPEC_CACHE) this.specs.clear();
      this.specs.set(partKey, spec);
    }
    const tag = this.tagOf ? this.tagOf(partKey) : partKey;
    const prefix = this.context.prefix;
    const key = this.tagOf
      ? `${prefix}{${tag}}${this.name}:${partKey}`
      : `${prefix}{${partKey}}:${this.name}`;
    return { key, spec, origin: '', owner: this, partKey, leased: this.leases };
  }

  private binding(resource: R): Binding {
    const partKey = keyFor(this, resource);
    return { members: [this.member(partKey)], partKey, chain: false };
  }
}

/** A spec the Redis store has a Lua twin for, or a TypeError naming `where`. */
export function checkSpec(where: string, spec: unknown): asserts spec is LimiterSpec {
  const s = spec as LimiterSpec;
  if (
    s === null ||
    typeof s !== 'object' ||
    typeof s.signature !== 'string' ||
    s.algorithm === null ||
    typeof s.algorithm !== 'object'
  ) {
    throw new TypeError(
      `${where} must be a limiter (fixedWindow(...), slidingWindow(...), tokenBucket(...), concurrency(...)); got ${describe(spec)}`,
    );
  }
  // The script runs only the algorithms that say how (see Algorithm.remote): asked by what they say, not their class.
  if (s.algorithm.remote === undefined) {
    const adaptive =
      s.algorithm.kind === 'concurrency' ? ' (adaptiveConcurrency() learns its limit in one process)' : '';
    throw new TypeError(
      `${where}: a Redis store cannot run algorithm ${JSON.stringify(s.algorithm.kind)}${adaptive}; it runs fixedWindow(...), slidingWindow(...), tokenBucket(...) and concurrency(...), and a limiter of your own in memory only`,
    );
  }
  // Sent with every call as they are now: a later setLimit on them could not reach Redis.
  s.freeze?.(where);
}

/**
 * The `leases` option: true, false or 'auto', and only for a fixed or sliding window, a token bucket (either
 * `'auto'`) or a concurrency limit (`true`) that does not count rejections (a rejection decided locally could not
 * be charged). `spec` undefined: tiers, checked per key.
 */
function checkLeases(where: string, leases: unknown, spec: LimiterSpec | undefined): boolean | 'auto' {
  if (leases === undefined || leases === false) return false;
  if (leases !== true && leases !== 'auto') {
    throw new TypeError(`${where}: leases must be true, false or 'auto'; got ${describe(leases)}`);
  }
  if (spec === undefined) return leases;
  const twin = spec.algorithm.remote?.twin;
  if (twin !== 'fw' && twin !== 'sw' && twin !== 'tb' && twin !== 'tc' && twin !== 'cc') {
    throw new TypeError(
      `${where}: leases are for fixedWindow(...), slidingWindow(...), tokenBucket(...) and concurrency(...); got ${JSON.stringify(spec.algorithm.kind)}`,
    );
  }
  if (leases === 'auto' && twin === 'cc') {
    throw new TypeError(
      `${where}: leases 'auto' is for windows and token buckets; a concurrency limit is leased for every key (leases: true) or none`,
    );
  }
  if ((spec.algorithm as { classes?: unknown }).classes !== undefined) {
    throw new TypeError(
      `${where}: leases cannot keep priority classes' shares (a batch taken for one class would serve another): leave classes out or leases off`,
    );
  }
  if (spec.options.countRejected) {
    throw new TypeError(
      `${where}: leases cannot count rejected requests (a rejection decided locally is not charged): countRejected must be false`,
    );
  }
  return leases;
}

function checkName(where: string, name: unknown): string {
  if (typeof name !== 'string' || name === '' || /[{}\n]/.test(name)) {
    throw new TypeError(
      `${where} must be a non-empty string without braces or newlines; got ${describe(name)}`,
    );
  }
  return name;
}
