/**
 * A concurrency limiter's lease ops (`l` take, `g` give-back and renewal) on this process's entry
 * `"<held>:<holder>/b"` in the key's lease set: see docs/architecture.md (Leased decisions).
 */
export const PERMIT_LEASE: string = `
local function permitLease(op, permits, c, key, lease, now)
  local need, held, holder = match(lease, '^(%d+):(%d+):(.*)$')
  need, held = tonumber(need), tonumber(held)
  local suffix = ':' .. holder .. '/b'
  local entries = call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local others, dead, lock, old = 0, false, false, false
  for i = 1, #entries, 2 do
    local v, expiry = entries[i], tonumber(entries[i + 1])
    if expiry <= now then dead = true
    elseif sub(v, -#suffix) == suffix then old = v
    else
      others = others + tonumber(match(v, '^(%d+)'))
      if v == LOCK_ENTRY then lock = expiry end
    end
  end
  if dead then call('ZREMRANGEBYSCORE', key, '-inf', num(now)) end
  local res = ''
  if op == 'l' then
    local available = c.limit - others - held
    if lock then
      res = lockedText(1, lock - now)
    elseif available >= need then
      local n = min(permits, available)
      held = held + n
      res = '1,' .. num(n) .. ',' .. num(available - n) .. ',,,' .. num(c.leaseTtl)
    else
      res = '0,1,,,' .. num(max(0, available)) .. ','
    end
  end
  local name = held .. suffix
  if old and old ~= name then call('ZREM', key, old) end
  if held > 0 then
    call('ZADD', key, num(now + c.leaseTtl), name)
    if call('PTTL', key) < c.leaseTtl + c.pad then call('PEXPIRE', key, c.leaseTtl + c.pad) end
  end
  return res
end
`;
