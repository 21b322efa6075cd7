/**
 * The decision code every call runs (as a Redis Function, or as a script on Redis 6): a batch of requests, each over one or more limiters (a chain), decided
 * in order and all-or-nothing per request, mirroring `LimiterCore.canGrant/commit/reject` and
 * `ChainLimiter.tryAcquire`. Layout (see `../protocol.ts`):
 *
 * - `ARGV[1]` the number of requests; then per request `op, permits, members, now` (`now` empty: Redis `TIME`)
 *   and per member `MEMBER_ARGS` values: `spec, origin, blocked, lease`, where `spec` is
 *   `kind:limit:p1:p2:countRejected:ttlPad:leaseTtl` (constant per limiter, so built once in JS). `KEYS` holds
 *   one key per member, in the same order.
 * - the common request in short, members with origin '', not blocked, no lease (arguments cost time at both
 *   ends): one member `T|W, permits, now, spec` (`t`/`w`); a chain `C|D, permits, now, members, spec…`; and
 *   shortest, a try of one permit on Redis's clock: `spec` alone for one member (every op is one letter),
 *   `B, members, spec…` for a chain.
 * - ops: `t` try (a rejection is charged when `countRejected`), `w` a queued attempt (never charged), `p` peek
 *   (available permits, read-only), `x` release a concurrency lease, `n` renew one (these two touch only the
 *   lease's own entry, in `decideBatch`), `r` refund a time-based grant (each member's `lease` is the grant's
 *   reset time from now, as the client reckons it).
 * - reply: one string, requests separated by ';', a request's fields by ',' — granted `1,remaining₁,reset₁,…`;
 *   rejected `0,index,retryAfter,chainRetryAfter,remaining,resetAfter`; peek `available₁,…`; release and renew
 *   ''. Numbers read back exactly (`num`), '' for none. One string rather than nested arrays: the client
 *   decodes it in one piece instead of element by element (most of a batch's decoding time).
 */
export const DECIDE = `
local ALGORITHMS = { fw = FW, sw = SW, tb = TB, tc = TB, cc = CC }

-- A member's settings, parsed once however many requests use them: per call as a script, and for the
-- library's lifetime as a Function (bounded: a store with many tiers must not grow it forever).
-- Per kind, how a lone member is tried (filled below, once the functions exist; none for concurrency).
local TRY = {}
local specs, specCount = {}, 0
local function spec(text)
  local c = specs[text]
  if c then return c end
  if specCount >= 1000 then specs, specCount = {}, 0 end
  specCount = specCount + 1
  local kind, limit, p1, p2, cr, pad, ttl = match(text, '^(%a+):([^:]*):([^:]*):([^:]*):(%d):([^:]*):([^:]*)$')
  p1, p2 = tonumber(p1), tonumber(p2)
  c = {
    a = ALGORITHMS[kind],
    cc = kind == 'cc',
    limit = tonumber(limit),
    p1 = p1,
    p2 = p2,
    seg = kind == 'sw' and p1 / p2 or 0,
    rate = (kind == 'tb' or kind == 'tc') and p1 / p2 or 0,
    continuous = kind == 'tc',
    countRejected = cr == '1',
    pad = tonumber(pad),
    leaseTtl = tonumber(ttl),
    try = TRY[kind],
    width = 0,
  }
  if kind ~= 'cc' then c.width = c.a.width(c) end
  specs[text] = c
  return c
end

-- The most common decision, a lone fixed window tried (op 't' or 'w'), inlined on locals: what \`member\`,
-- \`decide\` and \`save\` do for it, operation for operation (FW's functions written out), without the member
-- and state tables.
local function fixedWindowTry(c, key, origin, blocked, op, permits, now)
  local limit, w = c.limit, c.p1
  local start, count, extra
  local raw = call('GET', key)
  if raw then start, count, extra = munpack(raw) end
  local before, second
  if count ~= nil and extra == nil then
    before, second = start, count
  else
    -- A fresh state (or one of another width, as \`readState\` says), anchored as \`FW.init\` anchors it.
    if origin == '' then start = now else start = tonumber(origin) end
    count = 0
  end
  if now - start >= w then
    start = start + floor((now - start) / w) * w
    count = 0
  end
  local dirty = start ~= before
  local keepTtl = before ~= nil and before == start and second > 0
  local need = permits
  if need == 0 then need = 1 end
  local res
  if limit - count >= need and (permits == 0 or not blocked) then
    if permits > 0 then
      count = count + permits
      dirty = true
      local reset = 0
      if count ~= 0 then reset = start + w - now end
      local left = limit - count
      if left < 0 then left = 0 end
      res = '1,' .. num(left) .. ',' .. num(reset)
    else
      res = '1,' .. num(limit - count) .. ','
    end
  else
    if op == 't' and permits > 0 and c.countRejected then
      count = count + permits
      dirty = true
    end
    local retry = 0
    if limit - count < need then retry = start + w - now end
    local reset = 0
    if count ~= 0 then reset = start + w - now end
    retry = num(retry)
    res = '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, limit - count)) .. ',' .. num(reset)
  end
  if dirty then
    if keepTtl then
      call('SET', key, mpack(start, count), 'KEEPTTL')
    else
      local ttl = 0
      if count ~= 0 then ttl = ceil(start + w - now) end
      if ttl ~= ttl or ttl < 1 then ttl = 1 end
      call('SET', key, mpack(start, count), 'PX', ttl + c.pad)
    end
  end
  return res
end

local function member(c, key, origin, blocked, lease, now)
  -- One constructor with every field: a table grown field by field rehashes, and that costs more than the
  -- algorithm itself.
  local m = { a = c.a, c = c, key = key, blocked = blocked, lease = lease, dirty = false, s = false, keepTtl = false }
  if c.cc then
    m.s = loadLeases(key, now)
    return m
  end
  local a = m.a
  local s = readState(key, c.width)
  local before, second
  if s then
    before, second = s[1], s[2]
  else
    -- A fresh state, anchored where memory anchors it: the limiter's origin when known, else now.
    s = {}
    if origin == '' then a.init(c, s, now) else a.init(c, s, tonumber(origin)) end
  end
  a.advance(c, s, now)
  -- Kept whenever it moved: advancing in the same steps as memory gives the same doubles (continuous refill
  -- and fractional segments round differently if two steps are taken as one).
  m.dirty = s[1] ~= before
  m.s = s
  m.keepTtl = before ~= nil and a.sameExpiry ~= nil and a.sameExpiry(c, before, second, s)
  return m
end

-- Persists a time-based state; it expires when back to full (plus the pad), as a fresh one would decide alike.
local function save(m, now)
  m.dirty = false
  local ttl = ceil(m.a.resetAfter(m.c, m.s, now))
  if ttl ~= ttl or ttl < 1 then ttl = 1 end
  writeState(m.key, m.s, ttl + m.c.pad, m.keepTtl)
end

local function canGrant(m, permits, need)
  return m.a.available(m.c, m.s) >= need and (permits == 0 or not m.blocked)
end

local function decide(op, permits, ms, now)
  if op == 'p' then
    local res = {}
    for j, m in ipairs(ms) do res[j] = num(max(0, m.a.available(m.c, m.s))) end
    return concat(res, ',')
  end
  if op == 'r' then
    -- A refund: the member's \`lease\` field carries the grant's reset time from now.
    for _, m in ipairs(ms) do
      if m.a.refund and m.a.refund(m.c, m.s, permits, tonumber(m.lease) or 0, now) then m.dirty = true end
    end
    return ''
  end
  local need = permits
  if need == 0 then need = 1 end
  local n = #ms
  local blocked = 0
  for j = 1, n do
    if not canGrant(ms[j], permits, need) then
      blocked = j
      break
    end
  end
  if blocked == 0 then
    -- Sized for two members by the constructor (a table grown slot by slot reallocates); a lone member's
    -- unused slots are left out of the reply.
    local res = { '1', false, false, false, false }
    for j = 1, n do
      local m = ms[j]
      local a, c, s = m.a, m.c, m.s
      if permits > 0 then
        a.take(c, s, permits)
        if a.timeBased then m.dirty = true else holdLease(m.key, m.lease, now + c.leaseTtl, c.leaseTtl + c.pad) end
        res[2 * j] = num(max(0, a.available(c, s)))
        if a.timeBased then res[2 * j + 1] = num(a.resetAfter(c, s, now)) else res[2 * j + 1] = '' end
      else
        res[2 * j] = num(a.available(c, s))
        res[2 * j + 1] = ''
      end
    end
    return concat(res, ',', 1, 2 * n + 1)
  end
  local m = ms[blocked]
  if op == 't' and permits > 0 and m.c.countRejected and m.a.timeBased then
    m.a.take(m.c, m.s, permits)
    m.dirty = true
  end
  local retry = m.a.retryAfter(m.c, m.s, now, need)
  local longest = retry
  for j = 1, n do
    local o = ms[j]
    if j ~= blocked and not canGrant(o, permits, need) then
      local wait = o.a.retryAfter(o.c, o.s, now, need)
      if wait == wait and (longest ~= longest or wait > longest) then longest = wait end
    end
  end
  return '0,' .. blocked .. ',' .. num(retry) .. ',' .. num(longest) .. ',' .. num(max(0, m.a.available(m.c, m.s))) .. ',' .. num(m.a.resetAfter(m.c, m.s, now))
end

-- A lone time-based member tried (op 't' or 'w'): what \`member\`, \`decide\` and \`save\` do for it, in the same
-- order through the same algorithm functions, without the member, member-list and growing reply tables.
local function singleTry(c, key, origin, blocked, op, permits, now)
  local a = c.a
  local s = readState(key, c.width)
  local before, second
  if s then
    before, second = s[1], s[2]
  else
    s = {}
    if origin == '' then a.init(c, s, now) else a.init(c, s, tonumber(origin)) end
  end
  a.advance(c, s, now)
  local dirty = s[1] ~= before
  local keepTtl = before ~= nil and a.sameExpiry ~= nil and a.sameExpiry(c, before, second, s)
  local need = permits
  if need == 0 then need = 1 end
  local res
  if a.available(c, s) >= need and (permits == 0 or not blocked) then
    if permits > 0 then
      a.take(c, s, permits)
      dirty = true
      res = '1,' .. num(max(0, a.available(c, s))) .. ',' .. num(a.resetAfter(c, s, now))
    else
      res = '1,' .. num(a.available(c, s)) .. ','
    end
  else
    if op == 't' and permits > 0 and c.countRejected then
      a.take(c, s, permits)
      dirty = true
    end
    local retry = num(a.retryAfter(c, s, now, need))
    res = '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, a.available(c, s))) .. ',' .. num(a.resetAfter(c, s, now))
  end
  if dirty then
    local ttl = ceil(a.resetAfter(c, s, now))
    if ttl ~= ttl or ttl < 1 then ttl = 1 end
    writeState(key, s, ttl + c.pad, keepTtl)
  end
  return res
end

-- A lone token bucket tried: \`fixedWindowTry\` for TB (its functions written out, operation for operation).
local function bucketWait(c, stamp, tokens, now, n)
  local missing = n - tokens
  if missing <= EPSILON then return 0 end
  if c.continuous then return missing / c.rate end
  return stamp + ceil(missing / c.p1) * c.p2 - now
end
local function tokenBucketTry(c, key, origin, blocked, op, permits, now)
  local limit = c.limit
  local stamp, tokens, extra
  local raw = call('GET', key)
  if raw then stamp, tokens, extra = munpack(raw) end
  local before
  if tokens ~= nil and extra == nil then
    before = stamp
  else
    if origin == '' then stamp = now else stamp = tonumber(origin) end
    tokens = limit
  end
  local elapsed = now - stamp
  if c.continuous then
    if elapsed > 0 then
      stamp = now
      local refilled = tokens + elapsed * c.rate
      if refilled >= limit - EPSILON then tokens = limit else tokens = refilled end
    end
  elseif elapsed >= c.p2 then
    local periods = floor(elapsed / c.p2)
    stamp = stamp + periods * c.p2
    tokens = min(limit, tokens + periods * c.p1)
  end
  local dirty = stamp ~= before
  local need = permits
  if need == 0 then need = 1 end
  local res
  if floor(tokens + EPSILON) >= need and (permits == 0 or not blocked) then
    if permits > 0 then
      tokens = tokens - permits
      dirty = true
      res = '1,' .. num(max(0, floor(tokens + EPSILON))) .. ',' .. num(bucketWait(c, stamp, tokens, now, limit))
    else
      res = '1,' .. num(floor(tokens + EPSILON)) .. ','
    end
  else
    if op == 't' and permits > 0 and c.countRejected then
      tokens = tokens - permits
      dirty = true
    end
    local retry = num(bucketWait(c, stamp, tokens, now, need))
    res = '0,1,' .. retry .. ',' .. retry .. ',' .. num(max(0, floor(tokens + EPSILON))) .. ',' .. num(bucketWait(c, stamp, tokens, now, limit))
  end
  if dirty then
    -- TB has no \`sameExpiry\`: the TTL is always set anew.
    local ttl = ceil(bucketWait(c, stamp, tokens, now, limit))
    if ttl ~= ttl or ttl < 1 then ttl = 1 end
    call('SET', key, mpack(stamp, tokens), 'PX', ttl + c.pad)
  end
  return res
end
TRY.fw, TRY.sw, TRY.tb, TRY.tc = fixedWindowTry, singleTry, tokenBucketTry, tokenBucketTry

-- The entry point, called with the command's keys and arguments (\`KEYS\`, \`ARGV\` as a script).
local function decideBatch(KEYS, ARGV)
  if not call then bind() end
  local clock
  local out = {}
  local argi, keyi = 2, 1
  local requests = int(ARGV[1])
  for r = 1, requests do
    local op = ARGV[argi]
    local permits, at, short, chain, count
    if #op > 1 then
      -- The spec alone: a lone try of one permit on Redis's clock.
      op, permits, at, short = 't', 1, '', true
    elseif op == 'B' then
      op, permits, at, chain = 't', 1, '', true
      count = int(ARGV[argi + 1])
      argi = argi + 2
    else
      permits, at = int(ARGV[argi + 1]), ARGV[argi + 2]
      short = op == 'T' or op == 'W'
      chain = op == 'C' or op == 'D'
      if short then
        if op == 'T' then op = 't' else op = 'w' end
        argi = argi + 3
      elseif chain then
        if op == 'C' then op = 't' else op = 'w' end
        count = int(ARGV[argi + 3])
        argi = argi + 4
      else
        count, at = tonumber(at), ARGV[argi + 3]
        argi = argi + 4
      end
    end
    local now
    if at ~= '' then
      now = tonumber(at)
    else
      if not clock then
        local t = call('TIME')
        clock = seconds(t[1]) * 1000 + millis(t[2])
      end
      now = clock
    end
    if short then
      local c, key = spec(ARGV[argi]), KEYS[keyi]
      argi = argi + 1
      keyi = keyi + 1
      if c.try then
        out[r] = c.try(c, key, '', false, op, permits, now)
      else
        local m = member(c, key, '', false, '', now)
        out[r] = decide(op, permits, { m }, now)
        if m.dirty then save(m, now) end
      end
    elseif chain then
      local ms = {}
      for j = 1, count do
        ms[j] = member(spec(ARGV[argi]), KEYS[keyi], '', false, '', now)
        argi = argi + 1
        keyi = keyi + 1
      end
      out[r] = decide(op, permits, ms, now)
      for j = 1, count do
        local m = ms[j]
        if m.dirty then save(m, now) end
      end
    elseif op == 'x' or op == 'n' then
      -- A concurrency lease released or renewed: its own entry only, no member state read (a time-based member
      -- of the chain has nothing to give back, and is left to its next decision).
      for _ = 1, count do
        local c, key, lease = spec(ARGV[argi]), KEYS[keyi], ARGV[argi + 3]
        if c.cc then
          if op == 'x' then call('ZREM', key, lease)
          elseif call('ZSCORE', key, lease) then holdLease(key, lease, now + c.leaseTtl, c.leaseTtl + c.pad) end
        end
        argi = argi + 4
        keyi = keyi + 1
      end
      out[r] = ''
    else
      local c = count == 1 and (op == 't' or op == 'w') and spec(ARGV[argi])
      if c and c.try then
        out[r] = c.try(c, KEYS[keyi], ARGV[argi + 1], ARGV[argi + 2] == '1', op, permits, now)
        argi = argi + 4
        keyi = keyi + 1
      else
        local ms = {}
        for j = 1, count do
          ms[j] = member(spec(ARGV[argi]), KEYS[keyi], ARGV[argi + 1], ARGV[argi + 2] == '1', ARGV[argi + 3], now)
          argi = argi + 4
          keyi = keyi + 1
        end
        out[r] = decide(op, permits, ms, now)
        for j = 1, count do
          local m = ms[j]
          if m.dirty then save(m, now) end
        end
      end
    end
  end
  if requests == 1 then return out[1] end
  return concat(out, ';')
end
`;
