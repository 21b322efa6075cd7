/**
 * Lua twin of `src/algorithms/fixed-window.ts`, statement for statement (same operations in the same order, so
 * the same doubles come out). Member `m`: `limit`, `p1` = window. State `s`: `{ windowStart, count }`.
 * Functions take the member rather than closing over it: no closure is allocated per decision.
 */
export const FIXED_WINDOW: string = `
-- How many window ends until \`n\` permits fit, with \`count\` counted now (debt carried: see \`FW.advance\`).
local function fwWindows(m, count, n)
  if m.countRejected or count <= m.limit then return 1 end
  local k = ceil((count + n - m.limit) / m.limit)
  if k < 1 then k = 1 end
  return k
end

local FW = {
  width = function() return 2 end,
  timeBased = true,
  init = function(m, s, now)
    s[1] = now
    s[2] = 0
  end,
  advance = function(m, s, now)
    local start, w = s[1], m.p1
    if now - start >= w then
      local windows = floor((now - start) / w)
      s[1] = start + windows * w
      -- A count over the limit (a settle's overdraw) is debt each later window pays up to \`limit\` of; not
      -- with countRejected, whose penalties end with their window.
      local debt = s[2] - windows * m.limit
      if m.countRejected or debt <= 0 then s[2] = 0 else s[2] = debt end
    end
  end,
  available = function(m, s) return m.limit - s[2] end,
  take = function(m, s, n) s[2] = s[2] + n end,
  retryAfter = function(m, s, now, n)
    local count = s[2]
    if m.limit - count >= n then return 0 end
    -- Not in debt (the common case, a chain's every grant): no call.
    if count <= m.limit or m.countRejected then return s[1] + m.p1 - now end
    return s[1] + fwWindows(m, count, n) * m.p1 - now
  end,
  resetAfter = function(m, s, now)
    local count = s[2]
    if count == 0 then return 0 end
    if count <= m.limit or m.countRejected then return s[1] + m.p1 - now end
    return s[1] + ceil(count / m.limit) * m.p1 - now
  end,

  isFull = function(m, s) return s[2] <= 0 end,
  -- A refund (op 'r'): \`expected\` is the grant's reset time from now, as the client reckons it. The current
  -- window is the grant's when its end is that near (a later one ends a whole window further).
  refund = function(m, s, n, expected, now)
    local off = s[1] + m.p1 - now - expected
    if off < 0 then off = -off end
    if s[2] <= 0 or off * 2 >= m.p1 then return false end
    s[2] = max(0, s[2] - n)
    return true
  end,
  -- A lease's give-back (op 'g'): unspent permits of the window that starts at \`mark\`, only while it is current
  -- (\`FixedWindow.refund\` by mark).
  giveBack = function(m, s, n, mark)
    if s[1] ~= mark or s[2] <= 0 then return false end
    s[2] = max(0, s[2] - n)
    return true
  end,
  -- Where a lease taken now is void: the window's end.
  leaseEnd = function(m, s) return s[1] + m.p1 end,
  -- Same window, and the stored TTL was already its end (count > 0): the key's expiry stands (SET KEEPTTL).
  -- Not when now in debt: its expiry is windows further (see \`resetAfter\`). A longer expiry kept is harmless.
  sameExpiry = function(m, oldStart, oldCount, s)
    return oldStart == s[1] and oldCount > 0 and s[2] <= m.limit
  end,
}

-- The most common decision, a lone fixed window tried (op 't' or 'w'), inlined on locals: what \`member\`,
-- \`decide\` and \`save\` do for it, operation for operation (FW's functions written out), without the member
-- and state tables. Decided on \`raw\`, the packed state (false: none); answers the reply, then the state to
-- write (nil: none) and its TTL (nil: the key's expiry stands), for \`lone\` to read and write.
local function fixedWindowTry(c, raw, origin, blocked, op, permits, now)
  local limit, w = c.limit, c.p1
  local start, count, extra
  if raw then start, count, extra = munpack(raw) end
  local before, second
  if count ~= nil and extra == nil then
    before, second = start, count
  else
    -- A fresh state (or one of another width, as \`unpacked\` says), anchored as \`FW.init\` anchors it.
    if origin == '' then start = now else start = tonumber(origin) end
    count = 0
  end
  if now - start >= w then
    local windows = floor((now - start) / w)
    start = start + windows * w
    local debt = count - windows * limit
    if c.countRejected or debt <= 0 then count = 0 else count = debt end
  end
  local dirty = start ~= before
  -- (Only an overdraw leaves the count over the limit, from a count of 0, whose expiry is not kept: a stored
  -- expiry for debt, windows further, is kept.)
  local keepTtl = before ~= nil and before == start and second > 0
  local need = permits
  -- An overdraw (more than the limit, with the overdraw option) needs the whole limit free.
  if need == 0 then need = 1 elseif need > limit and c.overdraw then need = limit end
  local res
  if limit - count >= need and (permits == 0 or not blocked) then
    if permits > 0 then
      count = count + permits
      dirty = true
      local reset = 0
      -- Over the limit only after an overdraw (from a count of 0): its debt is paid windows further.
      if count > limit and not c.countRejected then reset = start + fwWindows(c, count, limit) * w - now
      elseif count ~= 0 then reset = start + w - now end
      local left = limit - count
      if left < 0 then left = 0 end
      -- grantedText written out for whole numbers (the call is a sixtieth of the decision).
      if left % 1 == 0 and reset % 1 == 0 and left < 1e15 and reset < 1e15 and reset > -1e15 then
        res = format('1,%d,%d', left, reset)
      else
        res = grantedText(left, reset)
      end
    else
      res = '1,' .. num(limit - count) .. ','
    end
  else
    if op == 't' and permits > 0 and c.countRejected then
      count = count + permits
      dirty = true
    end
    local retry = 0
    if limit - count < need then retry = start + fwWindows(c, count, need) * w - now end
    local reset = 0
    if count ~= 0 then reset = start + fwWindows(c, count, limit) * w - now end
    retry = num(retry)
    res = '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, limit - count)) .. ',' .. num(reset)
  end
  if not dirty then return res end
  if keepTtl then return res, mpack(start, count) end
  local ttl = 0
  if count ~= 0 then ttl = ceil(start + fwWindows(c, count, limit) * w - now) end
  if ttl ~= ttl or ttl < 1 then ttl = 1 end
  return res, mpack(start, count), ttl + c.pad
end
`;
