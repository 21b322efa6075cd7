/**
 * A concurrency limiter's lease ops (`leases: true`, issue 26): a process keeps one entry in the key's sorted set
 * of leases, `"<held>:<holder>/b"` scored by its expiry, for the permits it holds — in use by its requests, or
 * free in its batch. They count as held in Redis like any lease until it sets the entry lower (a give-back) or
 * it expires (the process died: `leaseTtl` after its last take or renewal, as a lone lease).
 *
 * The member's `lease` field is `need:held:holder`: `held` is what this process holds now (it knows; its entry
 * may have lapsed while it was paused, and is written anew), `need` the permits a take must add. A take (`l`)
 * adds between `need` and `permits` of what the other entries leave, or adds none and is refused as a try is
 * (no retry time: permits come back by releases); either way the entry is written as what the process holds. A
 * give-back (`g`) writes the entry as `held` (removed at 0), which also renews it. Answers as a window's take:
 * `1,granted,remaining,,,leaseTtl`; a give-back ''.
 */
export const PERMIT_LEASE = `
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
