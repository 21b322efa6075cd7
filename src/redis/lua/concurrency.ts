/**
 * Lua twin of `src/algorithms/concurrency.ts`, with the held permits kept as a sorted set of leases scored by
 * their expiry: `"<permits>:<lease id>"`. Leases whose holder died (never released, never renewed) fall out at
 * the next decision, so a crashed process cannot hold permits forever. State `s`: `{ held }`.
 */
export const CONCURRENCY = `
local CC = {
  timeBased = false,
  available = function(m, s) return m.limit - s[1] end,
  take = function(m, s, n) s[1] = s[1] + n end,
  retryAfter = function(m, s, now, n)
    if m.limit - s[1] >= n then return 0 end
    return 0 / 0
  end,
  resetAfter = function(m, s, now)
    if s[1] == 0 then return 0 end
    return 0 / 0
  end,
  isFull = function(m, s) return s[1] == 0 end,
}
local function loadLeases(key, now)
  call('ZREMRANGEBYSCORE', key, '-inf', num(now))
  local held = 0
  for _, v in ipairs(call('ZRANGE', key, 0, -1)) do
    held = held + tonumber(match(v, '^(%d+)'))
  end
  return { held }
end
local function holdLease(key, lease, expiry, ttl)
  call('ZADD', key, num(expiry), lease)
  if call('PTTL', key) < ttl then call('PEXPIRE', key, ttl) end
end
`;
