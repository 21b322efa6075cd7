/**
 * Lua twin of `src/algorithms/token-bucket.ts` (stepped and continuous). Member `m`: `limit`, `p1` = tokens per
 * period, `p2` = period, `rate` = p1 / p2, `continuous`. State `s`: `{ stamp, tokens }`.
 */
export const TOKEN_BUCKET: string = `
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
  -- After a change: a stepped bucket whose stamp stands and whose tokens are as many periods from full as the
  -- stored ones expires when they did (the stamp plus those periods, on a whole-millisecond clock).
  sameExpiry = function(m, oldStamp, oldTokens, s, now)
    local missing = m.limit - oldTokens
    local left = m.limit - s[2]
    return oldStamp == s[1] and not m.continuous and now % 1 == 0 and missing > EPSILON and left > EPSILON
      and ceil(left / m.p1) == ceil(missing / m.p1)
  end,
  -- A refund (op 'r'): the tokens back, never above the limit.
  refund = function(m, s, n)
    if s[2] >= m.limit then return false end
    s[2] = min(m.limit, s[2] + n)
    return true
  end,
}

-- A lone token bucket tried: \`fixedWindowTry\` for TB (its functions written out, operation for operation).
local function bucketWait(c, stamp, tokens, now, n)
  local missing = n - tokens
  if missing <= EPSILON then return 0 end
  if c.continuous then return missing / c.rate end
  return stamp + ceil(missing / c.p1) * c.p2 - now
end
local function tokenBucketTry(c, raw, origin, blocked, op, permits, now)
  local limit = c.limit
  local stamp, tokens, extra
  if raw then stamp, tokens, extra = munpack(raw) end
  local before, missingBefore
  if tokens ~= nil and extra == nil then
    before, missingBefore = stamp, limit - tokens
  else
    if origin == '' then stamp = now else stamp = tonumber(origin) end
    tokens = limit
  end
  local elapsed = now - stamp
  if c.continuous then
    if elapsed > 0 then
      stamp = now
      local refilled = tokens + elapsed * c.rate
      if refilled >= limit - EPSILON then tokens = limit else tokens = refilled end
    end
  elseif elapsed >= c.p2 then
    local periods = floor(elapsed / c.p2)
    stamp = stamp + periods * c.p2
    tokens = min(limit, tokens + periods * c.p1)
  end
  local dirty = stamp ~= before
  local need = permits
  -- An overdraw (more than the limit, with the overdraw option) needs the whole bucket full.
  if need == 0 then need = 1 elseif need > limit and c.overdraw then need = limit end
  local res
  if floor(tokens + EPSILON) >= need and (permits == 0 or not blocked) then
    if permits > 0 then
      tokens = tokens - permits
      dirty = true
      res = grantedText(max(0, floor(tokens + EPSILON)), bucketWait(c, stamp, tokens, now, limit))
    else
      res = '1,' .. num(floor(tokens + EPSILON)) .. ','
    end
  else
    if op == 't' and permits > 0 and c.countRejected then
      tokens = tokens - permits
      dirty = true
    end
    local retry = num(bucketWait(c, stamp, tokens, now, need))
    res = '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, floor(tokens + EPSILON))) .. ',' .. num(bucketWait(c, stamp, tokens, now, limit))
  end
  if not dirty then return res end
  -- A stepped bucket whose stamp stands and whose tokens are as many periods from full as before: the key's
  -- expiry (the stamp plus those periods, on a whole-millisecond clock) stands too.
  if stamp == before and not c.continuous and now % 1 == 0 and missingBefore > EPSILON
    and limit - tokens > EPSILON and ceil((limit - tokens) / c.p1) == ceil(missingBefore / c.p1) then
    return res, mpack(stamp, tokens)
  end
  local ttl = ceil(bucketWait(c, stamp, tokens, now, limit))
  if ttl ~= ttl or ttl < 1 then ttl = 1 end
  return res, mpack(stamp, tokens), ttl + c.pad
end
`;
