/**
 * Lua twin of `src/algorithms/lockout.ts`, statement for statement. Member `m`: `limit` = failures, `p1` =
 * within, and from `p2` (`lockFor_factor_maxLockFor_memory`): `lockFor`, `factor`, `maxLock`, `memory`. State
 * `s`: `{ failures, windowEnd, lockedUntil, streak, stamp }`.
 */
export const LOCKOUT: string = `
local LO = {
  width = function() return 5 end,
  timeBased = true,
  init = function(m, s, now)
    s[1] = 0
    s[2] = now
    s[3] = 0
    s[4] = 0
    s[5] = now
  end,
  advance = function(m, s, now)
    if now > s[5] then s[5] = now end
    local stamp = s[5]
    if s[1] > 0 and stamp >= s[2] then s[1] = 0 end
    if s[4] > 0 and stamp >= s[3] + m.memory then s[4] = 0 end
  end,
  locked = function(m, s) return s[3] > s[5] end,
  available = function(m, s)
    if s[3] > s[5] then return 0 end
    return m.limit - s[1]
  end,
  take = function(m, s, n)
    local now = s[5]
    if s[1] == 0 then s[2] = now + m.p1 end
    s[1] = s[1] + n
    if s[1] < m.limit then return end
    local streak = s[4] + 1
    s[4] = streak
    s[3] = now + min(m.lockFor * m.factor ^ (streak - 1), m.maxLock)
    s[1] = 0
  end,
  retryAfter = function(m, s, now, n)
    if s[3] > now then return s[3] - now end
    if m.limit - s[1] >= n then return 0 end
    return s[2] - now
  end,
  resetAfter = function(m, s, now)
    if s[3] > now then return s[3] - now end
    if s[1] == 0 then return 0 end
    return s[2] - now
  end,
  -- How long the key must live: while locked, counting, or remembering growth (from the end of the last lockout).
  expiry = function(m, s, now)
    local t = 0
    if s[1] > 0 then t = s[2] - now end
    if s[3] - now > t then t = s[3] - now end
    if s[4] > 0 and s[3] + m.memory - now > t then t = s[3] + m.memory - now end
    return t
  end,
  isFull = function(m, s) return s[1] == 0 and s[4] == 0 and s[3] <= s[5] end,
  -- A success (op 'r'): failures and growth cleared; the lockout lifted when this grant started it. Redis keeps no
  -- record of the grant: the one that started the lockout is the one that left no permits (\`emptied\`), and
  -- \`expected\` (the reset time its answer gave, less the time since, as the client reckons it) is when that
  -- lockout ends: a later lockout ends at least \`lockFor\` later.
  refund = function(m, s, n, expected, now, emptied)
    local started = emptied and s[3] > s[5] and s[1] == 0
    if started then
      local off = s[3] - now - expected
      if off < 0 then off = -off end
      started = off * 2 < min(m.lockFor, 2000)
    end
    s[1] = 0
    s[4] = 0
    if started then s[3] = s[5] end
    return true
  end,
}
`;
