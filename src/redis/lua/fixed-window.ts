/**
 * Lua twin of `src/algorithms/fixed-window.ts`, statement for statement (same operations in the same order, so
 * the same doubles come out). Member `m`: `limit`, `p1` = window. State `s`: `{ windowStart, count }`.
 * Functions take the member rather than closing over it: no closure is allocated per decision.
 */
export const FIXED_WINDOW = `
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
      s[1] = start + floor((now - start) / w) * w
      s[2] = 0
    end
  end,
  available = function(m, s) return m.limit - s[2] end,
  take = function(m, s, n) s[2] = s[2] + n end,
  retryAfter = function(m, s, now, n)
    if m.limit - s[2] >= n then return 0 end
    return s[1] + m.p1 - now
  end,
  resetAfter = function(m, s, now)
    if s[2] == 0 then return 0 end
    return s[1] + m.p1 - now
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
  -- Same window, and the stored TTL was already its end (count > 0): the key's expiry stands (SET KEEPTTL).
  sameExpiry = function(m, oldStart, oldCount, s) return oldStart == s[1] and oldCount > 0 end,
}
`;
