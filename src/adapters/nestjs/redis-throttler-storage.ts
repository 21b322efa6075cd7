import { createHash } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { type Duration, describe, parseDuration } from '../../duration.ts';
import type { Clock } from '../../limiters/core.ts';
import { rejectUnknown } from '../../options/known.ts';
import { type RedisClientLike, type ScriptRunner, scriptRunner } from '../../redis/client.ts';
import { meanwhileOf, OutageWarnings } from '../../redis/outage.ts';
import { StoreUnavailableError } from '../../redis/request.ts';
import type { Script } from '../../redis/script.ts';
import { telemetry } from '../../telemetry.ts';
import type { FloodgateThrottlerStorage, ThrottlerStorageRecord } from './throttler-storage.ts';

/**
 * A storage that answers hits in this process (`new FloodgateThrottlerStorage()`): the insurance of an outage.
 * Any object with its `increment` (a ThrottlerStorage of @nestjs/throttler) will do.
 */
export type ThrottlerStorageLike = Pick<FloodgateThrottlerStorage, 'increment'>;

/** Options of {@link FloodgateRedisThrottlerStorage}. */
export interface FloodgateRedisThrottlerStorageOptions {
  /** An ioredis or node-redis client (single node or Cluster). */
  client: RedisClientLike;
  /** Prefix of the Redis keys. Default `'floodgate:throttler:'`. */
  prefix?: string;
  /** Each hit's own deadline, whatever the client's timeouts, retries and offline queue do. Default 50 ms. */
  timeoutMs?: Duration;
  /**
   * What a hit gets when Redis fails or misses the deadline: counted as a first hit and let through
   * (`'fail-open'`, the default), refused for `retryIntervalMs` (`'fail-closed'`: the guard's 429), or decided by
   * a storage in this process (`new FloodgateThrottlerStorage()`: each instance then enforces the limit alone).
   */
  onUnavailable?: 'fail-open' | 'fail-closed' | ThrottlerStorageLike;
  /** After a failure, hits skip Redis (straight to `onUnavailable`) for this long, then try it again. Default 500 ms. */
  retryIntervalMs?: Duration;
  /**
   * Called with each Redis failure or missed deadline (the hit already has its answer). Without it the storage
   * emits a `FloodgateWarning` once per outage (`FLOODGATE_REDIS_UNAVAILABLE`) and once when Redis answers again
   * (`FLOODGATE_REDIS_RECOVERED`).
   */
  onError?: (error: Error) => void;
  /** A clock in milliseconds for every instance to share (tests); default the Redis server's `TIME`. */
  clock?: Clock;
}

const OPTION_NAMES = [
  'client',
  'prefix',
  'timeoutMs',
  'onUnavailable',
  'retryIntervalMs',
  'onError',
  'clock',
] as const satisfies readonly (keyof FloodgateRedisThrottlerStorageOptions)[];

// The same answer as the memory storage, decided in Redis: KEYS[1] the hits' expiries in arrival order (a list:
// expired ones leave from the front), KEYS[2] the window's end and the block. Both expire once nothing in them
// counts any more.
const BODY = `
local function throttle(keys, args)
  local now = tonumber(args[4])
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local ttl, limit, block = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local list, state = keys[1], keys[2]
  while true do
    local first = redis.call('LINDEX', list, 0)
    if not first or tonumber(first) > now then break end
    redis.call('LPOP', list)
  end
  local s = redis.call('HMGET', state, 'w', 'b', 'e')
  local w = tonumber(s[1]) or (now + ttl)
  local blocked = s[2] == '1'
  local blockEnds = tonumber(s[3]) or 0
  local tte = math.ceil((w - now) / 1000)
  if tte <= 0 then
    w = now + ttl
    tte = math.ceil(ttl / 1000)
  end
  local count = redis.call('LLEN', list)
  local expires = string.format('%.0f', now + ttl)
  local isBlocked, tbe, total
  if block <= 0 then
    isBlocked = count >= limit
    if not isBlocked then
      redis.call('RPUSH', list, expires)
      count = count + 1
    end
    tbe = 0
    if isBlocked then
      local first = tonumber(redis.call('LINDEX', list, 0))
      if first then tbe = math.ceil((first - now) / 1000) else tbe = tte end
    end
    total = count + (isBlocked and 1 or 0)
  else
    if not blocked then
      redis.call('RPUSH', list, expires)
      count = count + 1
      if count > limit then
        blocked = true
        blockEnds = now + block
      end
    end
    tbe = math.ceil((blockEnds - now) / 1000)
    if blocked and tbe <= 0 then
      blocked = false
      redis.call('DEL', list)
      redis.call('RPUSH', list, expires)
      count = 1
    end
    isBlocked = blocked
    total = count
    if not blocked then tbe = 0 end
  end
  redis.call('HSET', state, 'w', string.format('%.0f', w), 'b', blocked and '1' or '0', 'e', string.format('%.0f', blockEnds))
  -- Relative: now may be the caller's clock rather than the server's.
  local keep = string.format('%.0f', math.max(w, blockEnds, now + ttl) - now + 1000)
  redis.call('PEXPIRE', state, keep)
  redis.call('PEXPIRE', list, keep)
  return { total, tte, isBlocked and 1 or 0, tbe }
end
`;

function script(body: string): Script {
  const source = `${body}\nreturn throttle(KEYS, ARGV)\n`;
  const fn = `floodgate_throttler_${createHash('sha1').update(body).digest('hex').slice(0, 16)}`;
  const library = `#!lua name=${fn}\n${body}\nredis.register_function('${fn}', throttle)\n`;
  return { source, sha: createHash('sha1').update(source).digest('hex'), library, fn };
}

const THROTTLE = script(BODY);

/**
 * {@link FloodgateThrottlerStorage}'s answers, kept in Redis and shared by every instance of the application:
 * `ThrottlerModule.forRoot({ throttlers, storage: new FloodgateRedisThrottlerStorage({ client }) })`. Each hit is
 * one round trip, decided atomically by one script (a flood of concurrent hits cannot pass the limit); the two
 * keys of a tracker share a hash slot, so Redis Cluster works. Time is the Redis server's.
 *
 * Redis never hangs a hit: each has its own deadline (`timeoutMs`), and a hit Redis fails or misses it for is
 * answered by `onUnavailable`, as the Redis store's decisions are; after a failure hits skip Redis for
 * `retryIntervalMs`, then try it again.
 */
export class FloodgateRedisThrottlerStorage {
  readonly #runner: ScriptRunner;
  readonly #prefix: string;
  readonly #clock: Clock | undefined;
  readonly #timeoutMs: number;
  readonly #onUnavailable: 'fail-open' | 'fail-closed' | ThrottlerStorageLike;
  readonly #retryIntervalMs: number;
  readonly #onError: ((error: Error) => void) | undefined;
  readonly #outage: OutageWarnings;
  /** Until when hits skip Redis after a failure (performance.now() time); 0 while nothing failed. */
  #skipUntil = 0;

  constructor(options: FloodgateRedisThrottlerStorageOptions) {
    rejectUnknown('FloodgateRedisThrottlerStorage', options, OPTION_NAMES);
    if (options === null || typeof options !== 'object') {
      throw new TypeError('FloodgateRedisThrottlerStorage: options must be an object with a client');
    }
    this.#runner = scriptRunner(options.client);
    const prefix = options.prefix ?? 'floodgate:throttler:';
    if (typeof prefix !== 'string')
      throw new TypeError(`FloodgateRedisThrottlerStorage: prefix must be a string; got ${describe(prefix)}`);
    this.#prefix = prefix;
    const clock = options.clock;
    if (
      clock !== undefined &&
      (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function')
    ) {
      throw new TypeError(
        `FloodgateRedisThrottlerStorage: clock must be an object with a now() method; got ${describe(clock)}`,
      );
    }
    this.#clock = clock;
    this.#timeoutMs = parseDuration('FloodgateRedisThrottlerStorage: timeoutMs', options.timeoutMs ?? 50);
    this.#retryIntervalMs = parseDuration(
      'FloodgateRedisThrottlerStorage: retryIntervalMs',
      options.retryIntervalMs ?? 500,
      true,
    );
    const policy = options.onUnavailable ?? 'fail-open';
    if (
      policy !== 'fail-open' &&
      policy !== 'fail-closed' &&
      (typeof policy !== 'object' || policy === null || typeof policy.increment !== 'function')
    ) {
      throw new TypeError(
        `FloodgateRedisThrottlerStorage: onUnavailable must be 'fail-open', 'fail-closed' or a storage such as new FloodgateThrottlerStorage(); got ${describe(options.onUnavailable)}`,
      );
    }
    this.#onUnavailable = policy;
    if (options.onError !== undefined && typeof options.onError !== 'function') {
      throw new TypeError(
        `FloodgateRedisThrottlerStorage: onError must be a function; got ${describe(options.onError)}`,
      );
    }
    this.#onError = options.onError;
    this.#outage = new OutageWarnings(
      'FloodgateRedisThrottlerStorage',
      policy === 'fail-open' || policy === 'fail-closed'
        ? meanwhileOf(policy).replace('decision', 'hit')
        : 'hits are counted by the onUnavailable storage in this process',
      options.onError !== undefined,
    );
  }

  /** Counts a hit of `key` for `throttlerName`; `ttl` and `blockDuration` in milliseconds, the answer in seconds. */
  increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    // One hash tag per tracker and throttler: both keys in one slot.
    const base = `${this.#prefix}{${throttlerName}:${key}}`;
    const args = [`${base}:h`, `${base}:s`, String(ttl), String(limit), String(blockDuration)];
    if (this.#clock !== undefined) args.push(String(Math.round(this.#clock.now())));
    if (this.#skipUntil !== 0) {
      if (performance.now() < this.#skipUntil)
        return this.#fallback(key, ttl, limit, blockDuration, throttlerName);
      this.#skipUntil = 0;
    }
    return new Promise((resolve) => {
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        this.#failed(new StoreUnavailableError(`Redis did not answer within ${this.#timeoutMs} ms`));
        resolve(this.#fallback(key, ttl, limit, blockDuration, throttlerName));
      }, this.#timeoutMs);
      this.#runner.run(
        THROTTLE,
        2,
        args,
        (reply) => {
          // A reply after the deadline is a hit counted late: spent, on the safe side.
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (this.#outage.outage) this.#outage.answered('');
          const [totalHits, timeToExpire, blocked, timeToBlockExpire] = reply as number[];
          resolve({
            totalHits: Number(totalHits),
            timeToExpire: Number(timeToExpire),
            isBlocked: Number(blocked) === 1,
            timeToBlockExpire: Number(timeToBlockExpire),
          });
        },
        (cause) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.#failed(
            new StoreUnavailableError(`Redis failed: ${(cause as Error)?.message ?? cause}`, { cause }),
          );
          resolve(this.#fallback(key, ttl, limit, blockDuration, throttlerName));
        },
      );
    });
  }

  /** Redis failed or was late: skip it for `retryIntervalMs`, say so once per outage, tell `onError`. */
  #failed(error: StoreUnavailableError): void {
    this.#skipUntil = performance.now() + this.#retryIntervalMs;
    this.#outage.failed('', error);
    this.#onError?.(error);
  }

  /** The `onUnavailable` answer, counted in `floodgate.store.unavailable` under the throttler's name. */
  #fallback(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    telemetry().storeUnavailable.add(1, { limiter: throttlerName });
    const policy = this.#onUnavailable;
    if (policy === 'fail-open') {
      return Promise.resolve({
        totalHits: 1,
        timeToExpire: Math.ceil(ttl / 1000),
        isBlocked: false,
        timeToBlockExpire: 0,
      });
    }
    if (policy === 'fail-closed') {
      const retry = Math.max(1, Math.ceil(this.#retryIntervalMs / 1000));
      return Promise.resolve({
        totalHits: limit + 1,
        timeToExpire: retry,
        isBlocked: true,
        timeToBlockExpire: retry,
      });
    }
    return policy.increment(key, ttl, limit, blockDuration, throttlerName);
  }
}

// Nest's dependency injection, applied as a call: floodgate is compiled without decorator syntax.
Injectable()(FloodgateRedisThrottlerStorage);
