import { Injectable } from '@nestjs/common';
import type { Clock } from '../../limiters/core.ts';
import { integer, performanceClock } from '../../limiters/options.ts';
import { rejectUnknown } from '../../options/known.ts';

/** What `ThrottlerStorage.increment` answers (@nestjs/throttler's `ThrottlerStorageRecord`, same fields). */
export interface ThrottlerStorageRecord {
  /** Hits counted in the last `ttl` (the rejected one included while blocked). */
  totalHits: number;
  /** Seconds until the key's window ends (`X-RateLimit-Reset`). */
  timeToExpire: number;
  /** Whether this hit is refused. */
  isBlocked: boolean;
  /** Seconds until the block ends (`Retry-After`); meaningful when `isBlocked`. */
  timeToBlockExpire: number;
}

/** Options of {@link FloodgateThrottlerStorage}. */
export interface FloodgateThrottlerStorageOptions {
  /**
   * Keys (tracker × throttler) kept at most. Idle keys are dropped as new ones arrive; past the bound the least
   * recently used key is dropped even if it still counts hits (it starts afresh). Default 100 000.
   */
  maxKeys?: number;
  /** The clock, in milliseconds, monotonic. Default `performance.now()`. */
  clock?: Clock;
}

const OPTION_NAMES = [
  'maxKeys',
  'clock',
] as const satisfies readonly (keyof FloodgateThrottlerStorageOptions)[];

/** One key's state: when each counted hit expires, the window's end, and the block. */
interface Entry {
  hits: number[];
  windowEndsAt: number;
  blocked: boolean;
  blockEndsAt: number;
}

// Idle keys looked at per increment: enough to shed keys faster than one new key per call arrives.
const SWEEP_PER_CALL = 2;

/**
 * A drop-in storage for @nestjs/throttler's `ThrottlerGuard`: `ThrottlerModule.forRoot({ throttlers, storage:
 * new FloodgateThrottlerStorage() })`. It answers as the default `ThrottlerStorageService` does (each hit counts
 * for `ttl` ms; past `limit` the key is blocked for `blockDuration` ms, hits during the block are not counted;
 * with `blockDuration` 0 a hit past the limit is refused until the oldest hit expires), but holds at most
 * `maxKeys` keys and runs no timer: idle keys are dropped as later calls pass by, so memory follows the live keys.
 *
 * Keys are per throttler name and key, as the guard's default key already is.
 */
export class FloodgateThrottlerStorage {
  readonly #entries = new Map<string, Entry>();
  readonly #maxKeys: number;
  readonly #clock: Clock;

  constructor(options: FloodgateThrottlerStorageOptions = {}) {
    rejectUnknown('FloodgateThrottlerStorage', options, OPTION_NAMES);
    this.#maxKeys = integer('FloodgateThrottlerStorage: maxKeys', options.maxKeys ?? 100_000, 1);
    const clock = options.clock ?? performanceClock;
    if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') {
      throw new TypeError('FloodgateThrottlerStorage: clock must be an object with a now() method');
    }
    this.#clock = clock;
  }

  /** Keys held now. */
  get size(): number {
    return this.#entries.size;
  }

  /** Counts a hit of `key` for `throttlerName`; `ttl` and `blockDuration` in milliseconds, the answer in seconds. */
  increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    return Promise.resolve(this.#increment(`${throttlerName}\u0000${key}`, ttl, limit, blockDuration));
  }

  /** Drops every key (Nest calls it when the application closes). */
  onApplicationShutdown(): void {
    this.#entries.clear();
  }

  #increment(id: string, ttl: number, limit: number, blockDuration: number): ThrottlerStorageRecord {
    const now = this.#clock.now();
    const entries = this.#entries;
    let entry = entries.get(id);
    if (entry === undefined) {
      this.#sweep(now);
      entry = { hits: [], windowEndsAt: now + ttl, blocked: false, blockEndsAt: 0 };
      if (entries.size >= this.#maxKeys) entries.delete(entries.keys().next().value!);
    } else {
      entries.delete(id); // re-inserted below: the map's order is least recently used first
    }
    entries.set(id, entry);
    const hits = entry.hits;
    let kept = 0;
    for (let i = 0; i < hits.length; i++) if (hits[i]! > now) hits[kept++] = hits[i]!;
    hits.length = kept;
    let timeToExpire = Math.ceil((entry.windowEndsAt - now) / 1000);
    if (timeToExpire <= 0) {
      entry.windowEndsAt = now + ttl;
      timeToExpire = Math.ceil(ttl / 1000);
    }
    if (blockDuration <= 0) {
      // No block: a hit past the limit is refused (and not counted) until the oldest counted hit expires.
      const isBlocked = kept >= limit;
      if (!isBlocked) hits.push(now + ttl);
      let oldest = Number.POSITIVE_INFINITY;
      for (const at of hits) if (at < oldest) oldest = at;
      const timeToBlockExpire = hits.length > 0 ? Math.ceil((oldest - now) / 1000) : timeToExpire;
      return {
        totalHits: hits.length + (isBlocked ? 1 : 0),
        timeToExpire,
        isBlocked,
        timeToBlockExpire: isBlocked ? timeToBlockExpire : 0,
      };
    }
    if (!entry.blocked) {
      hits.push(now + ttl);
      if (hits.length > limit) {
        entry.blocked = true;
        entry.blockEndsAt = now + blockDuration;
      }
    }
    const timeToBlockExpire = Math.ceil((entry.blockEndsAt - now) / 1000);
    if (entry.blocked && timeToBlockExpire <= 0) {
      // The block is over: the count starts again from this hit.
      entry.blocked = false;
      hits.length = 0;
      hits.push(now + ttl);
    }
    return { totalHits: hits.length, timeToExpire, isBlocked: entry.blocked, timeToBlockExpire };
  }

  /** Drops the least recently used keys while they are idle: no live hit, no running block, window over. */
  #sweep(now: number): void {
    let looked = 0;
    for (const [id, entry] of this.#entries) {
      if (looked++ === SWEEP_PER_CALL) return;
      if (entry.windowEndsAt > now || (entry.blocked && entry.blockEndsAt > now)) return;
      for (const at of entry.hits) if (at > now) return;
      this.#entries.delete(id);
    }
  }
}

// Nest's dependency injection, applied as a call: floodgate is compiled without decorator syntax.
Injectable()(FloodgateThrottlerStorage);
