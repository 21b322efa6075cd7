import { createHash } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { describe } from '../../duration.ts';
import type { Clock } from '../../limiters/core.ts';
import { rejectUnknown } from '../../options/known.ts';
import { type RedisClientLike, type ScriptRunner, scriptRunner } from '../../redis/client.ts';
import type { Script } from '../../redis/script.ts';
import type { ThrottlerStorageRecord } from './throttler-storage.ts';

/** Options of {@link FloodgateRedisThrottlerStorage}. */
export interface FloodgateRedisThrottlerStorageOptions {
  /** An ioredis or node-redis client (single node or Cluster). */
  client: RedisClientLike;
  /** Prefix of the Redis keys. Default `'floodgate:throttler:'`. */
  prefix?: string;
  /** A clock in milliseconds for every instance to share (tests); default the Redis server's `TIME`. */
  clock?: Clock;
}

const OPTION_NAMES = [
  'client',
  'prefix',
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
 */
export class FloodgateRedisThrottlerStorage {
  readonly #runner: ScriptRunner;
  readonly #prefix: string;
  readonly #clock: Clock | undefined;

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
    return new Promise((resolve, reject) => {
      this.#runner.run(
        THROTTLE,
        2,
        args,
        (reply) => {
          const [totalHits, timeToExpire, blocked, timeToBlockExpire] = reply as number[];
          resolve({
            totalHits: Number(totalHits),
            timeToExpire: Number(timeToExpire),
            isBlocked: Number(blocked) === 1,
            timeToBlockExpire: Number(timeToBlockExpire),
          });
        },
        reject,
      );
    });
  }
}

// Nest's dependency injection, applied as a call: floodgate is compiled without decorator syntax.
Injectable()(FloodgateRedisThrottlerStorage);
