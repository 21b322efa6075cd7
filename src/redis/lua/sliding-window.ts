/**
 * Lua twin of `src/algorithms/sliding-window.ts`. State: `{ segmentStart, currentSlot, total, ring… }` with the
 * ring 0-based in slots, so `s[4 + slot]` mirrors `s[o + 3 + slot]`.
 */
export const SLIDING_WINDOW = `
local function slidingWindow(limit, w, segments)
  local seg = w / segments
  local width = 3 + segments
  local a = { width = width, timeBased = true, limit = limit }
  function a.init(s, now)
    for i = 1, width do s[i] = 0 end
    s[1] = now
  end
  function a.advance(s, now)
    local start = s[1]
    if now - start < seg then return end
    local steps = math.floor((now - start) / seg)
    s[1] = start + steps * seg
    if steps >= segments then
      for i = 2, width do s[i] = 0 end
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
  end
  function a.available(s) return limit - s[3] end
  function a.take(s, n)
    s[3] = s[3] + n
    s[4 + s[2]] = s[4 + s[2]] + n
  end
  function a.retryAfter(s, now, n)
    local need = n - (limit - s[3])
    if need <= 0 then return 0 end
    local slot, freed = s[2], 0
    for k = 0, segments - 1 do
      if slot + 1 == segments then slot = 0 else slot = slot + 1 end
      freed = freed + s[4 + slot]
      if freed >= need then return s[1] + (k + 1) * seg - now end
    end
    return s[1] + segments * seg - now
  end
  function a.resetAfter(s, now)
    if s[3] <= 0 then return 0 end
    local slot = s[2]
    for k = segments - 1, 0, -1 do
      if s[4 + slot] ~= 0 then return s[1] + (k + 1) * seg - now end
      if slot == 0 then slot = segments - 1 else slot = slot - 1 end
    end
    return 0
  end
  function a.isFull(s) return s[3] <= 0 end
  return a
end
`;
