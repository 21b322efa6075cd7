/**
 * The general decision of a request over one or more members (a chain, and every op but the commonest tries):
 * each member's state read (or taken from the known states, see `prelude.ts`), all checked, then all committed
 * or none, mirroring `LimiterCore.canGrant/commit/reject` and `ChainLimiter.tryAcquire`; and `singleTry`, a lone
 * member tried through the same algorithm functions.
 */
export const GENERAL: string = `
-- A fresh state for \`m\`, or its state in \`m.raw\` (the packed string, false for none), advanced to now.
local function fill(m, now)
  local c, a = m.c, m.a
  local raw = m.raw
  -- A lock (see \`lockEnd\`): in force, the member rejects and its state is not written (that would drop it);
  -- ended, the state under it is decided and written without it.
  m.locked, m.lockUntil = false, false
  if raw and byte(raw, 1) == LOCK_BYTE then
    local untilMs, under = lockEnd(raw)
    m.locked = true
    if SPECULATE then known[m.key] = nil end
    if untilMs > now then m.lockUntil = untilMs end
    raw = under
  end
  local s = unpacked(raw, c.width)
  local before, second
  if s then
    before, second = s[1], s[2]
  else
    -- A fresh state, anchored where memory anchors it: the limiter's origin when known, else now.
    s = {}
    if m.origin == '' then a.init(c, s, now) else a.init(c, s, tonumber(m.origin)) end
  end
  a.advance(c, s, now)
  -- Kept whenever it moved: advancing in the same steps as memory gives the same doubles (continuous refill
  -- and fractional segments round differently if two steps are taken as one).
  m.dirty = s[1] ~= before and not m.lockUntil
  m.s = s
  m.before, m.second = before or false, second or false
end

-- Whether \`m\`'s changed state expires when its stored one did (see each kind's \`sameExpiry\`), so its key's
-- expiry stands.
local function keepsTtl(m, now)
  local a = m.a
  return m.before and a.sameExpiry ~= nil and a.sameExpiry(m.c, m.before, m.second, m.s, now)
end

-- A member of a request. Its state is read from Redis, or with \`speculate\` taken from the known states
-- (\`m.known\`), which \`settle\` checks against Redis's.
local function member(c, key, origin, blocked, lease, now, speculate)
  -- One constructor with every field: a table grown field by field rehashes, and that costs more than the
  -- algorithm itself.
  local m = {
    a = c.a, c = c, key = key, origin = origin, blocked = blocked, lease = lease, dirty = false, s = false,
    before = false, second = false, raw = false, known = false, packed = false, locked = false, lockUntil = false,
  }
  if c.cc then
    m.s, m.lockUntil = loadLeases(key, now)
    return m
  end
  local raw = speculate and knownState(key)
  if raw then m.known = true else raw = call('GET', key) end
  m.raw = raw
  fill(m, now)
  return m
end

-- A time-based state's TTL: it expires when back to full (plus the pad), as a fresh one would decide alike.
local function ttlOf(m, now)
  local ttl = ceil((m.a.expiry or m.a.resetAfter)(m.c, m.s, now))
  if ttl ~= ttl or ttl < 1 then ttl = 1 end
  return ttl + m.c.pad
end

-- Persists a time-based state read from Redis.
local function save(m, now)
  m.dirty = false
  local packed = mpack(unpack(m.s))
  if keepsTtl(m, now) then call('SET', m.key, packed, 'KEEPTTL') else call('SET', m.key, packed, 'PX', ttlOf(m, now)) end
  remember(m.key, packed)
end

local function canGrant(m, permits, need)
  return m.a.available(m.c, m.s) >= need and (permits == 0 or not m.blocked)
end

local function own(m, permits)
  if m.c.one and permits > 1 then return 1 end
  return permits
end

-- What member m needs available to take p permits: one for a probe, the whole limit for an overdraw.
local function needOf(m, p)
  if p == 0 then return 1 end
  if p > m.c.limit and m.c.overdraw then return m.c.limit end
  return p
end

local function decide(op, permits, ms, now)
  if op == 'p' then
    local res = {}
    for j, m in ipairs(ms) do res[j] = num(max(0, m.a.available(m.c, m.s))) end
    return concat(res, ',')
  end
  if op == 'l' then
    -- A lease take (a lone fixed or sliding window): up to \`permits\` counted now in the current window
    -- (segment) when the member's \`lease\` field's permits are available; answered with the window's start
    -- (the batch's mark) and how long until it ends. Refused as a try is, never charged.
    local m = ms[1]
    local a, c, s = m.a, m.c, m.s
    local need = tonumber(m.lease)
    local available = a.available(c, s)
    if available >= need then
      local n = min(permits, available)
      a.take(c, s, n)
      m.dirty = true
      return '1,' .. num(n) .. ',' .. pairText(max(0, a.available(c, s)), a.resetAfter(c, s, now)) .. ',' .. num(s[1]) .. ',' .. num(a.leaseEnd(c, s) - now)
    end
    local retry = num(a.retryAfter(c, s, now, need))
    return '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, available)) .. ',' .. num(a.resetAfter(c, s, now))
  end
  if op == 'g' then
    -- A lease's give-back: the member's \`lease\` field is the batch's mark.
    local m = ms[1]
    if m.a.giveBack(m.c, m.s, permits, tonumber(m.lease)) then m.dirty = true end
    return ''
  end
  if op == 'r' then
    -- A refund: the member's \`lease\` field carries the grant's reset time from now, and 'z' after it when the
    -- grant left no permits. (Not into a locked state: its write would drop the lock.)
    for _, m in ipairs(ms) do
      local text = m.lease
      local emptied = byte(text, -1) == 122
      if emptied then text = text:sub(1, -2) end
      if m.a.refund and not m.lockUntil and m.a.refund(m.c, m.s, permits, tonumber(text) or 0, now, emptied) then
        m.dirty = true
      end
    end
    return ''
  end
  if op == 's' then
    -- A settle: the member's \`lease\` field is \`delta:expected\`; a charge is recorded past the limit (the work
    -- was done), a give-back follows the refund's rules. (Not into a locked state, as a refund.)
    for _, m in ipairs(ms) do
      local d, e = match(m.lease, '^([^:]*):(.*)$')
      d = tonumber(d)
      if m.lockUntil then
        -- nothing: the key is locked by hand
      elseif d > 0 then
        m.a.take(m.c, m.s, d)
        m.dirty = true
      elseif m.a.refund and m.a.refund(m.c, m.s, -d, tonumber(e) or 0, now) then
        m.dirty = true
      end
    end
    return ''
  end
  local n = #ms
  for j = 1, n do
    local lock = ms[j].lockUntil
    if lock then return lockedText(j, lock - now) end
  end
  local blocked = 0
  for j = 1, n do
    local p = own(ms[j], permits)
    if not canGrant(ms[j], p, needOf(ms[j], p)) then
      blocked = j
      break
    end
  end
  if blocked == 0 then
    -- Sized for two members by the constructor (a table grown slot by slot reallocates); a lone member's
    -- unused slot is left out of the reply. Each member's \`remaining,reset\`.
    local res = { '1', false, false }
    for j = 1, n do
      local m = ms[j]
      local a, c, s = m.a, m.c, m.s
      if permits > 0 then
        a.take(c, s, own(m, permits))
        if a.timeBased then
          m.dirty = true
          res[j + 1] = pairText(max(0, a.available(c, s)), a.resetAfter(c, s, now))
        else
          holdLease(m.key, m.lease, now + c.leaseTtl, c.leaseTtl + c.pad)
          res[j + 1] = num(max(0, a.available(c, s))) .. ','
        end
      else
        res[j + 1] = num(a.available(c, s)) .. ','
      end
    end
    return concat(res, ',', 1, n + 1)
  end
  local m = ms[blocked]
  if op == 't' and permits > 0 and m.c.countRejected and m.a.timeBased then
    m.a.take(m.c, m.s, own(m, permits))
    m.dirty = true
  end
  local retry = m.a.retryAfter(m.c, m.s, now, needOf(m, own(m, permits)))
  local longest = retry
  for j = 1, n do
    local o = ms[j]
    local p = own(o, permits)
    local oneed = needOf(o, p)
    if j ~= blocked and not canGrant(o, p, oneed) then
      local wait = o.a.retryAfter(o.c, o.s, now, oneed)
      if wait == wait and (longest ~= longest or wait > longest) then longest = wait end
    end
  end
  local res = '0,' .. blocked .. ',' .. num(retry) .. ',' .. num(longest) .. ',' .. num(max(0, m.a.available(m.c, m.s))) .. ',' .. num(m.a.resetAfter(m.c, m.s, now))
  if m.a.locked and m.a.locked(m.c, m.s) then res = res .. ',l' end
  return res
end

-- Decides a request and writes what changed. A member taken from the known states is checked by its write
-- (\`SET … GET KEEPTTL\`) or, unchanged, by a \`GET\`; if one was not Redis's, the writes are undone (KEEPTTL
-- kept their expiry) and the request decided again on Redis's states. \`leases\`: a concurrency member, whose
-- lease \`decide\` writes at once, so the known states are checked first.
local function settle(op, permits, ms, now, leases)
  local n = #ms
  if leases then
    for j = 1, n do
      local m = ms[j]
      if m.known then
        m.known = false
        local old = call('GET', m.key)
        if old ~= m.raw then
          m.raw = old
          fill(m, now)
        end
      end
    end
  end
  local res = decide(op, permits, ms, now)
  local wrong = false
  for j = 1, n do
    local m = ms[j]
    if m.known then
      local old
      if m.dirty then
        m.packed = mpack(unpack(m.s))
        old = call('SET', m.key, m.packed, 'GET', 'KEEPTTL')
      else
        m.packed = false
        old = call('GET', m.key)
      end
      if old ~= m.raw then wrong = true end
      m.raw = old
    end
  end
  if wrong then
    for j = 1, n do
      local m = ms[j]
      if m.known then
        if m.packed then
          if m.raw then call('SET', m.key, m.raw, 'KEEPTTL') else call('DEL', m.key) end
        end
        m.known = false
      end
      if not m.c.cc then fill(m, now) end
    end
    res = decide(op, permits, ms, now)
  end
  for j = 1, n do
    local m = ms[j]
    if m.known then
      if m.packed then
        if not keepsTtl(m, now) then call('PEXPIRE', m.key, ttlOf(m, now)) end
        remember(m.key, m.packed)
      end
    elseif m.dirty then
      save(m, now)
    elseif m.raw and not m.locked then
      remember(m.key, m.raw)
    end
  end
  return res
end

-- A lone time-based member tried (op 't' or 'w'): what \`member\`, \`decide\` and \`save\` do for it, in the same
-- order through the same algorithm functions, without the member, member-list and growing reply tables; on
-- \`raw\` and answering as \`fixedWindowTry\` does.
local function singleTry(c, raw, origin, blocked, op, permits, now)
  local a = c.a
  local s = unpacked(raw, c.width)
  local before, second
  if s then
    before, second = s[1], s[2]
  else
    s = {}
    if origin == '' then a.init(c, s, now) else a.init(c, s, tonumber(origin)) end
  end
  a.advance(c, s, now)
  local dirty = s[1] ~= before
  -- A take keeps the key's expiry when it keeps the state's time to full (see \`keepsOnTake\`).
  local keepTtl = before ~= nil and a.keepsOnTake ~= nil and a.keepsOnTake(c, before, s, now)
  local need = permits
  -- An overdraw (more than the limit, with the overdraw option) needs the whole limit free.
  if need == 0 then need = 1 elseif need > c.limit and c.overdraw then need = c.limit end
  local res
  if a.available(c, s) >= need and (permits == 0 or not blocked) then
    if permits > 0 then
      a.take(c, s, permits)
      dirty = true
      res = grantedText(max(0, a.available(c, s)), a.resetAfter(c, s, now))
    else
      res = '1,' .. num(a.available(c, s)) .. ','
    end
  else
    if op == 't' and permits > 0 and c.countRejected then
      a.take(c, s, permits)
      dirty = true
    end
    local retry = num(a.retryAfter(c, s, now, need))
    res = '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, a.available(c, s))) .. ',' .. num(a.resetAfter(c, s, now))
    -- A lockout says the key is locked out (the reason 'locked').
    if a.locked and a.locked(c, s) then res = res .. ',l' end
  end
  if not dirty then return res end
  if keepTtl or before ~= nil and a.sameExpiry ~= nil and a.sameExpiry(c, before, second, s, now) then
    return res, mpack(unpack(s))
  end
  local ttl = ceil((a.expiry or a.resetAfter)(c, s, now))
  if ttl ~= ttl or ttl < 1 then ttl = 1 end
  return res, mpack(unpack(s)), ttl + c.pad
end
`;
