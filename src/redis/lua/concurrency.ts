/**
 * Lua twin of `src/algorithms/concurrency.ts`, with the held permits kept as a sorted set of leases scored by
 * their expiry: `"<permits>:<lease id>"`. Leases whose holder died (never released, never renewed) fall out at
 * the next decision, so a crashed process cannot hold permits forever. State `s`: `{ held }`. With priority
 * classes a request is decided against its class's ceiling (`m.ceiling`, sent in its spec), not the limit: the
 * shares reserved for higher classes hold across every process, and what is left is what its class may use.
 */
export const CONCURRENCY = `
local CC = {
  timeBased = false,
  available = function(m, s) return m.ceiling - s[1] end,
  take = function(m, s, n) s[1] = s[1] + n end,
  retryAfter = function(m, s, now, n)
    if m.ceiling - s[1] >= n then return 0 end
    return 0 / 0
  end,
  resetAfter = function(m, s, now)
    if s[1] == 0 then return 0 end
    return 0 / 0
  end,
  isFull = function(m, s) return s[1] == 0 end,
}
-- The live leases' permits, and the end of a lock when the key has one (read by its score only then).
local function loadLeases(key, now)
  call('ZREMRANGEBYSCORE', key, '-inf', num(now))
  local held, lock = 0, false
  for _, v in ipairs(call('ZRANGE', key, 0, -1)) do
    held = held + tonumber(match(v, '^(%d+)'))
    if v == LOCK_ENTRY then lock = tonumber(call('ZSCORE', key, v)) end
  end
  return { held }, lock
end
local function holdLease(key, lease, expiry, ttl)
  call('ZADD', key, num(expiry), lease)
  if call('PTTL', key) < ttl then call('PEXPIRE', key, ttl) end
end

-- A lone concurrency member tried (op 't' or 'w', short form \`K|Q\`): what \`member\`, \`decide\` and
-- \`holdLease\` do for it, with fewer commands. The leases read with their scores in one \`ZRANGE\` (the dead
-- ones, scored at or before now, counted out and removed only when there are some, instead of a
-- \`ZREMRANGEBYSCORE\` every time), and the key's expiry lengthened by \`PEXPIRE … GT\` (Redis >= 7: what \`PTTL\`
-- then \`PEXPIRE\` do, in one command) or, with no live lease (a new key, with no expiry for GT to compare, or one gone with its dead leases), by
-- \`PEXPIRE\`. Answers as \`decide\` does.
local function leaseTry(c, key, blocked, lease, op, permits, now)
  local entries = call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local held, live, dead, lock = 0, 0, false, false
  for i = 1, #entries, 2 do
    local expiry = tonumber(entries[i + 1])
    if expiry <= now then dead = true
    else
      held = held + tonumber(match(entries[i], '^(%d+)'))
      live = live + 1
      if entries[i] == LOCK_ENTRY then lock = expiry end
    end
  end
  if dead then call('ZREMRANGEBYSCORE', key, '-inf', num(now)) end
  if lock then return lockedText(1, lock - now) end
  -- The request's class's share (priority classes), else the whole limit.
  local limit = c.ceiling
  local need = permits
  if need == 0 then need = 1 end
  if limit - held >= need and (permits == 0 or not blocked) then
    if permits == 0 then return '1,' .. num(limit - held) .. ',' end
    held = held + permits
    local ttl = c.leaseTtl + c.pad
    call('ZADD', key, num(now + c.leaseTtl), lease)
    if live == 0 then call('PEXPIRE', key, ttl)
    elseif SPECULATE then call('PEXPIRE', key, ttl, 'GT')
    elseif call('PTTL', key) < ttl then call('PEXPIRE', key, ttl) end
    return '1,' .. num(max(0, limit - held)) .. ','
  end
  local retry = 0
  if limit - held < need then retry = 0 / 0 end
  local reset = 0
  if held ~= 0 then reset = 0 / 0 end
  retry = num(retry)
  return '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, limit - held)) .. ',' .. num(reset)
end
`;
