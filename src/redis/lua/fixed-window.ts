/**
 * Lua twin of `src/algorithms/fixed-window.ts`, statement for statement (same operations in the same order, so
 * the same doubles come out). State: `{ windowStart, count }`.
 */
export const FIXED_WINDOW = `
local function fixedWindow(limit, w)
  local a = { width = 2, timeBased = true, limit = limit }
  function a.init(s, now)
    s[1] = now
    s[2] = 0
  end
  function a.advance(s, now)
    local start = s[1]
    if now - start >= w then
      s[1] = start + math.floor((now - start) / w) * w
      s[2] = 0
    end
  end
  function a.available(s) return limit - s[2] end
  function a.take(s, n) s[2] = s[2] + n end
  function a.retryAfter(s, now, n)
    if limit - s[2] >= n then return 0 end
    return s[1] + w - now
  end
  function a.resetAfter(s, now)
    if s[2] == 0 then return 0 end
    return s[1] + w - now
  end
  function a.isFull(s) return s[2] <= 0 end
  return a
end
`;
