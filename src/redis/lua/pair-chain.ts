/**
 * A chain whose members all keep a state of two numbers (fixed windows and token buckets), tried in the short
 * form (op 't' or 'w', no origin, nobody blocked, no lease): `member`/`decide`/`settle` of `general.ts`,
 * operation for operation through the same algorithm functions, on arrays reused from one request to the next
 * instead of a member table and a state table per member and request — which cost Redis more than the
 * decision itself.
 */
export const PAIR_CHAIN: string = `
-- Per member j of the request being decided: key, settings, the stored state (packed, false for none), whether
-- it was taken from the known states, the state (a reused table), before/second (its stored first two numbers,
-- false for none), dirty, and the state written speculatively.
local PK, PC, PRAW, PKNOWN, PS, PBEFORE, PSECOND, PDIRTY, PPACKED, PRES = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
-- A member's stored state was locked (see \`lockEnd\`): the request is left to the general path.
local PLOCKED = false

-- Member j's state from PRAW[j] (or a fresh one, anchored at now), advanced to now.
local function pairFill(j, now)
  local c, raw = PC[j], PRAW[j]
  local a = c.a
  local s = PS[j]
  if not s then
    s = {}
    PS[j] = s
  end
  local first, second, extra
  if raw then first, second, extra = munpack(raw) end
  if first == 'L' then PLOCKED = true end
  if second ~= nil and extra == nil then
    s[1], s[2] = first, second
    PBEFORE[j], PSECOND[j] = first, second
  else
    a.init(c, s, now)
    PBEFORE[j], PSECOND[j] = false, false
    first = nil
  end
  a.advance(c, s, now)
  PDIRTY[j] = s[1] ~= first
end

-- \`decide\` on the arrays (canGrant with nobody blocked).
local function pairDecide(op, permits, n, now)
  local need = permits
  if need == 0 then need = 1 end
  local blocked = 0
  for j = 1, n do
    local c = PC[j]
    -- An overdraw (more than the limit, with the overdraw option) needs the whole limit free.
    if c.a.available(c, PS[j]) < ((need > c.limit and c.overdraw) and c.limit or need) then
      blocked = j
      break
    end
  end
  if blocked == 0 then
    if n == 2 and permits > 0 then
      -- Two members granted, the common chain: one format call for the four numbers when they are whole.
      local c1, s1, c2, s2 = PC[1], PS[1], PC[2], PS[2]
      local a1, a2 = c1.a, c2.a
      a1.take(c1, s1, permits)
      a2.take(c2, s2, permits)
      PDIRTY[1], PDIRTY[2] = true, true
      local r1, t1 = max(0, a1.available(c1, s1)), a1.resetAfter(c1, s1, now)
      local r2, t2 = max(0, a2.available(c2, s2)), a2.resetAfter(c2, s2, now)
      if r1 % 1 == 0 and t1 % 1 == 0 and r2 % 1 == 0 and t2 % 1 == 0 and t1 < 1e15 and t1 > -1e15
        and t2 < 1e15 and t2 > -1e15 and r1 < 1e15 and r2 < 1e15 then
        return format('1,%d,%d,%d,%d', r1, t1, r2, t2)
      end
      return '1,' .. pairText(r1, t1) .. ',' .. pairText(r2, t2)
    end
    PRES[1] = '1'
    for j = 1, n do
      local c, s = PC[j], PS[j]
      local a = c.a
      if permits > 0 then
        a.take(c, s, permits)
        PDIRTY[j] = true
        PRES[j + 1] = pairText(max(0, a.available(c, s)), a.resetAfter(c, s, now))
      else
        PRES[j + 1] = num(a.available(c, s)) .. ','
      end
    end
    return concat(PRES, ',', 1, n + 1)
  end
  local c, s = PC[blocked], PS[blocked]
  local a = c.a
  if op == 't' and permits > 0 and c.countRejected then
    a.take(c, s, permits)
    PDIRTY[blocked] = true
  end
  local retry = a.retryAfter(c, s, now, (need > c.limit and c.overdraw) and c.limit or need)
  local longest = retry
  for j = 1, n do
    local oc, os = PC[j], PS[j]
    local oneed = (need > oc.limit and oc.overdraw) and oc.limit or need
    if j ~= blocked and oc.a.available(oc, os) < oneed then
      local wait = oc.a.retryAfter(oc, os, now, oneed)
      if wait == wait and (longest ~= longest or wait > longest) then longest = wait end
    end
  end
  return '0,' .. blocked .. ',' .. num(retry) .. ',' .. num(longest) .. ',' .. num(max(0, a.available(c, s))) .. ',' .. num(a.resetAfter(c, s, now))
end

-- Whether member j's changed state expires when its stored one did (its key's expiry stands), and its TTL.
local function pairKeeps(j, now)
  local c = PC[j]
  return PBEFORE[j] and c.a.sameExpiry ~= nil and c.a.sameExpiry(c, PBEFORE[j], PSECOND[j], PS[j], now)
end
local function pairTtl(j, now)
  local c = PC[j]
  local ttl = ceil(c.a.resetAfter(c, PS[j], now))
  if ttl ~= ttl or ttl < 1 then ttl = 1 end
  return ttl + c.pad
end

-- The chain decided over PK/PC (n members): read (or known), decided, written and checked as \`settle\` does.
-- Nil, with nothing written, when a member is locked: the general path decides it.
local function pairChain(op, permits, n, now)
  PLOCKED = false
  for j = 1, n do
    local key = PK[j]
    local raw = SPECULATE and known[key]
    if raw then PKNOWN[j] = true else
      PKNOWN[j] = false
      raw = call('GET', key)
    end
    PRAW[j] = raw
    pairFill(j, now)
  end
  if PLOCKED then return nil end
  local res = pairDecide(op, permits, n, now)
  local wrong = false
  for j = 1, n do
    if PKNOWN[j] then
      local old, packed = nil, false
      if PDIRTY[j] then
        local s = PS[j]
        packed = mpack(s[1], s[2])
        old = call('SET', PK[j], packed, 'GET', 'KEEPTTL')
      else
        old = call('GET', PK[j])
      end
      if old ~= PRAW[j] then wrong = true end
      PRAW[j], PPACKED[j] = old, packed
    end
  end
  if wrong then
    -- A known state was not Redis's: the speculative writes undone, and the chain decided again on Redis's.
    for j = 1, n do
      if PKNOWN[j] then
        PKNOWN[j] = false
        if PPACKED[j] then
          if PRAW[j] then call('SET', PK[j], PRAW[j], 'KEEPTTL') else call('DEL', PK[j]) end
        end
      end
      pairFill(j, now)
    end
    if PLOCKED then return nil end
    res = pairDecide(op, permits, n, now)
  end
  for j = 1, n do
    local key = PK[j]
    if PKNOWN[j] then
      if PPACKED[j] then
        if not pairKeeps(j, now) then call('PEXPIRE', key, pairTtl(j, now)) end
        known[key] = PPACKED[j]
      end
    elseif PDIRTY[j] then
      local s = PS[j]
      local packed = mpack(s[1], s[2])
      if pairKeeps(j, now) then call('SET', key, packed, 'KEEPTTL') else call('SET', key, packed, 'PX', pairTtl(j, now)) end
      remember(key, packed)
    elseif PRAW[j] then
      remember(key, PRAW[j])
    end
  end
  return res
end
`;
