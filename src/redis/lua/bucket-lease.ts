import { BUCKET_HOLD_MS, BUCKET_RESERVE } from '../batch.ts';

/**
 * A token bucket's lease ops (`l` take, `g` give-back) over the bucket and its holders' hash (`holder →
 * "extra:expiry"`): see docs/architecture.md (Leased decisions) for the protocol and its bound.
 */
export const BUCKET_LEASE: string = `
local BUCKET_HOLD, BUCKET_RESERVE = ${BUCKET_HOLD_MS}, ${BUCKET_RESERVE}

-- The live holders' extras: the others' sum and this holder's own (expired records dropped).
local function bucketHolders(hkey, id, now)
  local all = call('HGETALL', hkey)
  local others, mine = 0, 0
  for i = 1, #all, 2 do
    local extra, expiry = match(all[i + 1], '^([^:]*):(.*)$')
    extra, expiry = tonumber(extra), tonumber(expiry)
    if expiry <= now then call('HDEL', hkey, all[i])
    elseif all[i] == id then mine = extra
    else others = others + extra end
  end
  return others, mine
end

local function bucketLease(op, permits, c, key, hkey, origin, need, holder, now)
  local id, back = match(holder, '^(.*):([^:]*)$')
  back = tonumber(back)
  local others, mine = bucketHolders(hkey, id, now)
  local m = member(c, key, origin, false, '', now, false)
  local a, s = m.a, m.s
  if back > mine then back = mine end
  mine = mine - back
  if back > 0 and not m.lockUntil and a.refund(c, s, back) then m.dirty = true end
  local res = ''
  if op == 'l' then
    -- The batch was emptied when the take was sent: this holder keeps only what this take grants.
    mine = 0
    need = tonumber(need)
    local available = a.available(c, s)
    if m.lockUntil then
      res = lockedText(1, m.lockUntil - now)
    elseif available >= need then
      local spare = floor(c.limit * BUCKET_RESERVE) - others
      if spare < 0 then spare = 0 end
      local n = min(permits, available, need + spare)
      if n < need then n = need end
      a.take(c, s, n)
      m.dirty = true
      mine = n - need
      res = '1,' .. num(n) .. ',' .. pairText(max(0, a.available(c, s)), a.resetAfter(c, s, now)) .. ',,' .. num(BUCKET_HOLD)
    else
      local retry = num(a.retryAfter(c, s, now, need))
      res = '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, available)) .. ',' .. num(a.resetAfter(c, s, now))
    end
  end
  if mine > 0 then
    call('HSET', hkey, id, num(mine) .. ':' .. num(now + BUCKET_HOLD))
    if call('PTTL', hkey) < BUCKET_HOLD + c.pad then call('PEXPIRE', hkey, BUCKET_HOLD + c.pad) end
  else
    call('HDEL', hkey, id)
  end
  if m.dirty then save(m, now) end
  return res
end
`;
