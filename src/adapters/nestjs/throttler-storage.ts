import { Injectable } from '@nestjs/common';
import { describe } from '../../duration.ts';
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
  /** Seconds until the block ends (`Retry-After`) when `isBlocked`, else 0. */
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

/**
 * One key's state: when each counted hit expires (ascending, from `head`: expired hits leave from the front, so a
 * hit costs O(1) however many the window holds), the window's end, and the block.
 */
interface Entry {
  hits: number[];
  head: number;
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
      throw new TypeError(
        `FloodgateThrottlerStorage: clock must be an object with a now() method; got ${describe(clock)}`,
      );
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
      entry = { hits: [], head: 0, windowEndsAt: now + ttl, blocked: false, blockEndsAt: 0 };
      if (entries.size >= this.#maxKeys) entries.delete(entries.keys().next().value!);
    } else {
      entries.delete(id); // re-inserted below: the map's order is least recently used first
    }
    entries.set(id, entry);
    const hits = entry.hits;
    let head = entry.head;
    while (head < hits.length && hits[head]! <= now) head++;
    if (head === hits.length) {
      hits.length = 0;
      head = 0;
    } else if (head > 64 && head * 2 > hits.length) {
      hits.splice(0, head);
      head = 0;
    }
    entry.head = head;
    const kept = hits.length - head;
    let timeToExpire = Math.ceil((entry.windowEndsAt - now) / 1000);
    if (timeToExpire <= 0) {
      entry.windowEndsAt = now + ttl;
      timeToExpire = Math.ceil(ttl / 1000);
    }
    if (blockDuration <= 0) {
      // No block: a hit past the limit is refused (and not counted) until the oldest counted hit expires.
      const isBlocked = kept >= limit;
      if (!isBlocked) addHit(entry, now + ttl);
      const counted = hits.length - entry.head;
      const timeToBlockExpire = counted > 0 ? Math.ceil((hits[entry.head]! - now) / 1000) : timeToExpire;
      return {
        totalHits: counted + (isBlocked ? 1 : 0),
        timeToExpire,
        isBlocked,
        timeToBlockExpire: isBlocked ? timeToBlockExpire : 0,
      };
    }
    if (!entry.blocked) {
      addHit(entry, now + ttl);
      if (hits.length - entry.head > limit) {
        entry.blocked = true;
        entry.blockEndsAt = now + blockDuration;
      }
    }
    const timeToBlockExpire = Math.ceil((entry.blockEndsAt - now) / 1000);
    if (entry.blocked && timeToBlockExpire <= 0) {
      // The block is over: the count starts again from this hit.
      entry.blocked = false;
      hits.length = 0;
      entry.head = 0;
      hits.push(now + ttl);
    }
    return {
      totalHits: hits.length - entry.head,
      timeToExpire,
      isBlocked: entry.blocked,
      // The default storage answers a meaningless negative number here when not blocked; the guard reads it
      // only when blocked.
      timeToBlockExpire: entry.blocked ? timeToBlockExpire : 0,
    };
  }

  /** Drops the least recently used keys while they are idle: no live hit, no running block, window over. */
  #sweep(now: number): void {
    let looked = 0;
    for (const [id, entry] of this.#entries) {
      if (looked++ === SWEEP_PER_CALL) return;
      if (entry.windowEndsAt > now || (entry.blocked && entry.blockEndsAt > now)) return;
      const hits = entry.hits;
      if (hits.length > entry.head && hits[hits.length - 1]! > now) return;
      this.#entries.delete(id);
    }
  }
}

/** Adds a hit's expiry, in order: at the end when ttl is the same for every hit, as a throttler's is. */
function addHit(entry: Entry, expiresAt: number): void {
  const hits = entry.hits;
  let at = hits.length;
  while (at > entry.head && hits[at - 1]! > expiresAt) at--;
  if (at === hits.length) hits.push(expiresAt);
  else hits.splice(at, 0, expiresAt);
}

// Nest's dependency injection, applied as a call: floodgate is compiled without decorator syntax.
Injectable()(FloodgateThrottlerStorage);
