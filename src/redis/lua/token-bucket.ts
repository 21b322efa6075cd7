/** Lua twin of `src/algorithms/token-bucket.ts` (stepped and continuous). State: `{ stamp, tokens }`. */
export const TOKEN_BUCKET = `
local function tokenBucket(limit, perPeriod, period, continuous)
  local rate = perPeriod / period
  local a = { width = 2, timeBased = true, limit = limit }
  function a.init(s, now)
    s[1] = now
    s[2] = limit
  end
  function a.advance(s, now)
    local stamp = s[1]
    local elapsed = now - stamp
    if continuous then
      if elapsed <= 0 then return end
      s[1] = now
      local tokens = s[2] + elapsed * rate
      if tokens >= limit - EPSILON then s[2] = limit else s[2] = tokens end
      return
    end
    if elapsed < period then return end
    local periods = math.floor(elapsed / period)
    s[1] = stamp + periods * period
    s[2] = math.min(limit, s[2] + periods * perPeriod)
  end
  function a.available(s) return math.floor(s[2] + EPSILON) end
  function a.take(s, n) s[2] = s[2] - n end
  local function timeUntil(s, now, n)
    local missing = n - s[2]
    if missing <= EPSILON then return 0 end
    if continuous then return missing / rate end
    return s[1] + math.ceil(missing / perPeriod) * period - now
  end
  a.retryAfter = timeUntil
  function a.resetAfter(s, now) return timeUntil(s, now, limit) end
  function a.isFull(s) return s[2] >= limit end
  return a
end
`;
