/**
 * Lua twin of `src/algorithms/token-bucket.ts` (stepped and continuous). Member `m`: `limit`, `p1` = tokens per
 * period, `p2` = period, `rate` = p1 / p2, `continuous`. State `s`: `{ stamp, tokens }`.
 */
export const TOKEN_BUCKET = `
local function tbUntil(m, s, now, n)
  local missing = n - s[2]
  if missing <= EPSILON then return 0 end
  if m.continuous then return missing / m.rate end
  return s[1] + ceil(missing / m.p1) * m.p2 - now
end
local TB = {
  width = function() return 2 end,
  timeBased = true,
  init = function(m, s, now)
    s[1] = now
    s[2] = m.limit
  end,
  advance = function(m, s, now)
    local stamp = s[1]
    local elapsed = now - stamp
    local limit = m.limit
    if m.continuous then
      if elapsed <= 0 then return end
      s[1] = now
      local tokens = s[2] + elapsed * m.rate
      if tokens >= limit - EPSILON then s[2] = limit else s[2] = tokens end
      return
    end
    local period = m.p2
    if elapsed < period then return end
    local periods = floor(elapsed / period)
    s[1] = stamp + periods * period
    s[2] = min(limit, s[2] + periods * m.p1)
  end,
  available = function(m, s) return floor(s[2] + EPSILON) end,
  take = function(m, s, n) s[2] = s[2] - n end,
  retryAfter = tbUntil,
  resetAfter = function(m, s, now) return tbUntil(m, s, now, m.limit) end,
  isFull = function(m, s) return s[2] >= m.limit end,
  -- A refund (op 'r'): the tokens back, never above the limit.
  refund = function(m, s, n)
    if s[2] >= m.limit then return false end
    s[2] = min(m.limit, s[2] + n)
    return true
  end,
}
`;
