/**
 * Lua twin of `src/algorithms/concurrency.ts`, with the held permits kept as a sorted set of leases scored by
 * their expiry: `"<permits>:<lease id>"`. Leases whose holder died (never released, never renewed) fall out at
 * the next decision, so a crashed process cannot hold permits forever. State: `{ held }`.
 */
export const CONCURRENCY = `
local function concurrency(limit)
  local a = { width = 1, timeBased = false, limit = limit }
  function a.available(s) return limit - s[1] end
  function a.take(s, n) s[1] = s[1] + n end
  function a.retryAfter(s, now, n)
    if limit - s[1] >= n then return 0 end
    return 0 / 0
  end
  function a.resetAfter(s, now)
    if s[1] == 0 then return 0 end
    return 0 / 0
  end
  function a.isFull(s) return s[1] == 0 end
  return a
end
local function loadLeases(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now))
  local held = 0
  for _, v in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    held = held + tonumber(string.match(v, '^(%d+)'))
  end
  return { held }
end
local function holdLease(key, lease, expiry, ttl)
  redis.call('ZADD', key, num(expiry), lease)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
`;
