/**
 * Lua twin of `src/algorithms/sliding-window.ts`. Member `m`: `limit`, `p1` = window, `p2` = segments, `seg` =
 * window / segments. State `s`: `{ segmentStart, currentSlot, total, ring… }`, the ring 0-based in slots, so
 * `s[4 + slot]` mirrors `s[o + 3 + slot]`.
 */
export const SLIDING_WINDOW: string = `
-- Gives up to n permits back to the segment k segments before the current one, if it is still in the window
-- (a refund and a lease's give-back alike); whether anything changed.
local function swBack(m, s, n, k)
  local segments = m.p2
  if k < 0 or k >= segments then return false end
  local slot = (s[2] - k) % segments
  local back = min(n, s[4 + slot])
  if not (back > 0) then return false end
  s[4 + slot] = s[4 + slot] - back
  s[3] = s[3] - back
  return true
end

local SW = {
  width = function(m) return 3 + m.p2 end,
  timeBased = true,
  init = function(m, s, now)
    for i = 1, 3 + m.p2 do s[i] = 0 end
    s[1] = now
  end,
  advance = function(m, s, now)
    local start, seg, segments = s[1], m.seg, m.p2
    if now - start < seg then return end
    local steps = floor((now - start) / seg)
    s[1] = start + steps * seg
    if steps >= segments then
      for i = 2, 3 + segments do s[i] = 0 end
      return
    end
    local slot, total = s[2], s[3]
    for _ = 1, steps do
      if slot + 1 == segments then slot = 0 else slot = slot + 1 end
      total = total - s[4 + slot]
      s[4 + slot] = 0
    end
    s[2] = slot
    s[3] = total
  end,
  available = function(m, s) return m.limit - s[3] end,
  take = function(m, s, n)
    s[3] = s[3] + n
    s[4 + s[2]] = s[4 + s[2]] + n
  end,
  retryAfter = function(m, s, now, n)
    local need = n - (m.limit - s[3])
    if need <= 0 then return 0 end
    local segments, seg = m.p2, m.seg
    local slot, freed = s[2], 0
    for k = 0, segments - 1 do
      if slot + 1 == segments then slot = 0 else slot = slot + 1 end
      freed = freed + s[4 + slot]
      if freed >= need then return s[1] + (k + 1) * seg - now end
    end
    return s[1] + segments * seg - now
  end,
  resetAfter = function(m, s, now)
    if s[3] <= 0 then return 0 end
    local segments = m.p2
    local slot = s[2]
    for k = segments - 1, 0, -1 do
      if s[4 + slot] ~= 0 then return s[1] + (k + 1) * m.seg - now end
      if slot == 0 then slot = segments - 1 else slot = slot - 1 end
    end
    return 0
  end,
  isFull = function(m, s) return s[3] <= 0 end,
  -- A try (\`singleTry\`) into a current segment that already holds permits keeps the state's time to full (the
  -- window's end from that segment): the key's expiry stands, on a whole-millisecond clock.
  keepsOnTake = function(m, before, s, now) return before == s[1] and s[4 + s[2]] > 0 and now % 1 == 0 end,
  -- A lease's give-back (op 'g'): unspent permits of the segment that starts at \`mark\`, while it is still in the
  -- window (\`SlidingWindow.refund\` by mark: k segments back from the current one).
  giveBack = function(m, s, n, mark)
    return swBack(m, s, n, floor((s[1] - mark) / m.seg + 0.5))
  end,
  -- Where a lease taken now is void: the current segment's end.
  leaseEnd = function(m, s) return s[1] + m.seg end,
  -- A refund (op 'r'): the grant's segment leaves the window \`expected\` ms from now, as the client reckons it;
  -- k segments back from the current one, if still in the window.
  refund = function(m, s, n, expected, now)
    return swBack(m, s, n, floor((s[1] + m.p1 - now - expected) / m.seg + 0.5))
  end,
}
`;
