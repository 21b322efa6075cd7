import { BUCKET_HOLD_MS, BUCKET_RESERVE } from '../batch.ts';

/**
 * A token bucket's lease ops (`leases: true`, issue 26): a take (`l`) and a give-back (`g`) over two keys, the
 * bucket's own state and its holders (a hash beside it, in the same slot: `holder → "extra:expiry"`).
 *
 * Why the holders: a token taken into a batch is spent later than Redis counted it, so over a span the fleet can
 * admit what the bucket allows plus what the batches held at the span's start. Redis keeps that sum under
 * `reserve` (1 % of the limit, floored): each holder's `extra` is what its batch holds after the request that
 * took it (the tokens beyond that request's own), and a take grants at most its request's tokens plus what the
 * other live holders leave of the reserve. A holder's record lives `BUCKET_HOLD_MS` from the take; its batch is
 * void on its own clock as long after the take was *sent*, so no token is spent after its record is gone.
 * Tokens handed back are credited only up to the holder's live record (a void batch's tokens are forfeit:
 * crediting them after others took the reserve would count them twice).
 *
 * Request: `l|g, permits, 2, now`, then the bucket member (`lease`: the tokens the request needs) and the
 * holders member (`lease`: `holder:back`, the tokens this process hands back with the op). Reply of a take as a
 * window's: `1,granted,remaining,reset,,endMs` or a try's rejection; a give-back answers ''.
 */
export const BUCKET_LEASE = `
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
