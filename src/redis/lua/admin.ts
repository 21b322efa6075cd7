/**
 * Key administration (`state`, `reset`, `lock`, `unlock`, `charge`, `giveBack` of a Redis partitioned limiter):
 * one member in the general form, op `s` (answers `remaining,resetAfter,lockedFor`, or '' for a key Redis does
 * not hold), `z` reset, `l` lock (the member's `lease` field is the duration in ms), `u` unlock, `g` charge and
 * `v` give back (`permits`). Each reads the key's state as Redis has it and writes it in one step: a decision
 * running at the same time sees it before or after, never half.
 */
export const ADMIN: string = `
local ADMIN = { a = true, e = true, k = true, u = true, c = true, v = true }

-- Permits given back without a request, never past full: a window's count, a sliding window's segments newest
-- first, a bucket's tokens up to its limit.
local function giveBack(c, s, n)
  local a = c.a
  if a == FW then
    s[2] = max(0, s[2] - n)
  elseif a == SW then
    local segments, slot, left = c.p2, s[2], n
    for _ = 1, segments do
      local back = min(left, s[4 + slot])
      if back > 0 then
        s[4 + slot] = s[4 + slot] - back
        s[3] = s[3] - back
        left = left - back
      end
      if slot == 0 then slot = segments - 1 else slot = slot - 1 end
    end
  else
    s[2] = min(c.limit, s[2] + n)
  end
end

-- A concurrency key: its leases stay; a lock is the entry LOCK_ENTRY scored by its end; permits charged without
-- a request are one entry \`<n>:~charge\`, held like a lease nobody renews (it lapses after the lease TTL).
local function adminLeases(op, permits, key, c, arg, now)
  call('ZREMRANGEBYSCORE', key, '-inf', num(now))
  local entries = call('ZRANGE', key, 0, -1, 'WITHSCORES')
  if #entries == 0 and op ~= 'k' and op ~= 'c' then return '' end
  local held, lock, charged, chargeEntry = 0, false, 0, false
  for i = 1, #entries, 2 do
    local v = entries[i]
    local n = tonumber(match(v, '^(%d+)'))
    held = held + n
    if v == LOCK_ENTRY then lock = tonumber(entries[i + 1])
    elseif match(v, ':~charge$') then charged, chargeEntry = n, v end
  end
  if op == 'a' then
    local reset = ''
    if held == 0 then reset = '0' end
    local left = 0
    if lock then left = lock - now end
    return num(max(0, c.limit - held)) .. ',' .. reset .. ',' .. num(left)
  end
  if (op == 'u' or op == 'e') and lock then call('ZREM', key, LOCK_ENTRY) end
  if op == 'e' or op == 'v' then
    if chargeEntry then
      call('ZREM', key, chargeEntry)
      local left = 0
      if op == 'v' then left = charged - min(charged, permits) end
      if left > 0 then call('ZADD', key, num(now + c.leaseTtl), num(left) .. ':~charge') end
    end
  elseif op == 'c' and permits > 0 then
    if chargeEntry then call('ZREM', key, chargeEntry) end
    call('ZADD', key, num(now + c.leaseTtl), num(charged + permits) .. ':~charge')
    if call('PTTL', key) < c.leaseTtl + c.pad then call('PEXPIRE', key, c.leaseTtl + c.pad) end
  elseif op == 'k' then
    local ms = tonumber(arg)
    lockLeases(key, now + ms, ceil(ms) + c.pad)
  end
  return ''
end

local function admin(op, permits, c, key, origin, arg, now)
  if c.cc then return adminLeases(op, permits, key, c, arg, now) end
  local raw = call('GET', key)
  -- Written here, not by a decision: the next decision reads Redis's state rather than a known one.
  if SPECULATE then known[key] = nil end
  if not raw and op ~= 'k' and op ~= 'c' then return '' end
  if op == 'e' then
    call('DEL', key)
    return ''
  end
  local lock, under = false, raw
  if raw and byte(raw, 1) == LOCK_BYTE then
    local untilMs
    untilMs, under = lockEnd(raw)
    if untilMs > now then lock = untilMs end
  end
  if op == 'u' and not lock then return '' end
  local a = c.a
  local s = unpacked(under, c.width)
  if not s then
    s = {}
    if origin == '' then a.init(c, s, now) else a.init(c, s, tonumber(origin)) end
  end
  a.advance(c, s, now)
  if op == 'a' then
    local left = 0
    if lock then left = lock - now end
    return num(max(0, a.available(c, s))) .. ',' .. num(a.resetAfter(c, s, now)) .. ',' .. num(left)
  end
  if op == 'k' then lock = now + tonumber(arg)
  elseif op == 'u' then lock = false
  elseif op == 'c' then a.take(c, s, permits)
  else giveBack(c, s, permits) end
  if not lock and a.isFull(c, s) then
    call('DEL', key)
    return ''
  end
  local packed = mpack(unpack(s))
  local ttl = ceil(a.resetAfter(c, s, now))
  if ttl ~= ttl or ttl < 1 then ttl = 1 end
  if lock then
    packed = lockedState(lock, packed)
    ttl = max(ttl, ceil(lock - now))
  end
  call('SET', key, packed, 'PX', ttl + c.pad)
  return ''
end
`;
