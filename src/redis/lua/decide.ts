/**
 * The decision code every call runs (as a Redis Function, or as a script on Redis 6): a batch of requests, each over one or more limiters (a chain), decided
 * in order and all-or-nothing per request, mirroring `LimiterCore.canGrant/commit/reject` and
 * `ChainLimiter.tryAcquire`. Layout (see `../protocol.ts`):
 *
 * - `ARGV[1]` the number of requests; then per request `op, permits, members, now` (`now` empty: Redis `TIME`)
 *   and per member `MEMBER_ARGS` values: `spec, origin, blocked, lease`, where `spec` is
 *   `kind:limit:p1:p2:flags:ttlPad:leaseTtl` (constant per limiter, so built once in JS; flags 1 countRejected,
 *   2 overdraw, added). `KEYS` holds
 *   one key per member, in the same order.
 * - the common request in short, members with origin '', not blocked, no lease (arguments cost time at both
 *   ends): one member `T|W, permits, now, spec` (`t`/`w`); a chain `C|D, permits, now, members, spec…`; and
 *   shortest, a try of one permit on Redis's clock: `spec` alone for one member (every op is one letter),
 *   `B, members, spec…` for a chain. A lone concurrency lease (no origin, not blocked): `K|Q, permits, now, spec,
 *   lease` acquired (`t`/`w`), `X|N, now, spec, lease` released or renewed (`x`/`n`).
 * - ops: `t` try (a rejection is charged when `countRejected`), `w` a queued attempt (never charged), `p` peek
 *   (available permits, read-only), `x` release a concurrency lease, `n` renew one (these two touch only the
 *   lease's own entry, in `decideBatch`), `r` refund a time-based grant (each member's `lease` is the grant's
 *   reset time from now, as the client reckons it), `l` take a lease's batch (`permits` wanted, `lease` the
 *   permits needed; granted `1,granted,remaining,reset,mark,endMs`), `g` give a batch's unspent permits back
 *   (`lease` its mark; answers ''), a token bucket's take and give-back with its holders' key as a second
 *   member (`bucket-lease.ts`), a concurrency limiter's on this process's entry (`permit-lease.ts`), `s` settle a time-based grant (each member's `lease` is `delta:expected`:
 *   `delta` more charged, past the limit if need be, or `−delta` given back as a refund).
 * - reply: one string, requests separated by ';', a request's fields by ',' — granted `1,remaining₁,reset₁,…`;
 *   rejected `0,index,retryAfter,chainRetryAfter,remaining,resetAfter`; peek `available₁,…`; release and renew
 *   ''. Numbers read back exactly (`num`), '' for none. One string rather than nested arrays: the client
 *   decodes it in one piece instead of element by element (most of a batch's decoding time).
 */
export const DECIDE: string = `
local ALGORITHMS = { fw = FW, sw = SW, tb = TB, tc = TB, cc = CC, lo = LO }

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
  local kind, limit, p1, p2, cr, pad, ttl, one = match(text, '^(%a+):([^:]*):([^:]*):([^:]*):(%d):([^:]*):([^:]*):?(%d?)$')
  -- A lockout's further parameters ride in p2: \`lockFor_factor_maxLockFor_memory\`.
  local lockFor, factor, maxLock, memory = match(p2, '^([^_]*)_([^_]*)_([^_]*)_([^_]*)$')
  p1, p2 = tonumber(p1), tonumber(p2)
  c = {
    a = ALGORITHMS[kind],
    cc = kind == 'cc',
    limit = tonumber(limit),
    -- A concurrency member's p1 is the request's class's ceiling (priority classes), else its limit.
    ceiling = (kind == 'cc' and p1) or tonumber(limit),
    p1 = p1,
    p2 = p2,
    seg = kind == 'sw' and p1 / p2 or 0,
    rate = (kind == 'tb' or kind == 'tc') and p1 / p2 or 0,
    continuous = kind == 'tc',
    -- Flags: 1 countRejected, 2 overdraw.
    countRejected = cr == '1' or cr == '3',
    overdraw = cr == '2' or cr == '3',
    pad = tonumber(pad),
    leaseTtl = tonumber(ttl),
    lockFor = tonumber(lockFor),
    factor = tonumber(factor),
    maxLock = tonumber(maxLock),
    memory = tonumber(memory),
    one = one == '1',
    try = TRY[kind],
    width = 0,
  }
  if kind ~= 'cc' then c.width = c.a.width(c) end
  specs[text] = c
  return c
end

TRY.fw, TRY.sw, TRY.tb, TRY.tc, TRY.lo = fixedWindowTry, singleTry, tokenBucketTry, tokenBucketTry, singleTry

-- A lone member tried (op 't' or 'w'). A time-based one by its kind's try, on its known state when there is
-- one: the result written by \`SET … GET KEEPTTL\`, whose answer (the state Redis had) confirms it, and the
-- expiry set after when it moves; when Redis had another, the write is undone and the try made again on
-- Redis's state (see \`prelude.ts\`). Otherwise read (\`GET\`) first.
local function lone(c, key, origin, blocked, lease, op, permits, now)
  local try = c.try
  -- A concurrency member: its lease written by \`decide\` itself, nothing else to write.
  if not try then
    if origin == '' then return leaseTry(c, key, blocked, lease, op, permits, now) end
    return decide(op, permits, { member(c, key, origin, blocked, lease, now, false) }, now)
  end
  -- (knownState and remember written out: a call each is a twentieth of a decision.)
  local raw = SPECULATE and known[key]
  if raw then
    local res, packed, ttl = try(c, raw, origin, blocked, op, permits, now)
    local old
    if packed then old = call('SET', key, packed, 'GET', 'KEEPTTL') else old = call('GET', key) end
    if old == raw then
      if packed then
        if ttl then call('PEXPIRE', key, ttl) end
        known[key] = packed
      end
      return res
    end
    if packed then
      if old then call('SET', key, old, 'KEEPTTL') else call('DEL', key) end
    end
    raw = old
  else
    raw = call('GET', key)
  end
  if raw and byte(raw, 1) == LOCK_BYTE then
    -- Locked (see \`lockEnd\`): rejected while the lock is in force; once it ended, decided on the state under
    -- it, written back without it.
    local untilMs, under = lockEnd(raw)
    -- Forgotten as known: the next decision reads Redis's state (one GET) rather than guessing and undoing.
    if SPECULATE then known[key] = nil end
    if untilMs > now then return lockedText(1, untilMs - now) end
    if under then call('SET', key, under, 'KEEPTTL') else call('DEL', key) end
    raw = under
  end
  local res, packed, ttl = try(c, raw, origin, blocked, op, permits, now)
  if packed then
    if ttl then call('SET', key, packed, 'PX', ttl) else call('SET', key, packed, 'KEEPTTL') end
    raw = packed
  end
  if raw then remember(key, raw) end
  return res
end

-- The entry point, called with the command's keys and arguments (\`KEYS\`, \`ARGV\` as a script).
local function decideBatch(KEYS, ARGV)
  if not call then bind() end
  local clock
  local out = {}
  local argi, keyi = 2, 1
  local requests = int(ARGV[1])
  for r = 1, requests do
    local op = ARGV[argi]
    local permits, at, short, chain, count, lone1, leaseArgs
    if #op > 1 then
      -- The spec alone: a lone try of one permit on Redis's clock.
      op, permits, at, short = 't', 1, '', true
    elseif op == 'K' or op == 'Q' or op == 'X' or op == 'N' then
      -- A lone concurrency lease: acquired (\`K\` a try, \`Q\` a queued attempt: \`permits, now, spec, lease\`), or
      -- released / renewed (\`X\` / \`N\`: \`now, spec, lease\`).
      if op == 'K' or op == 'Q' then
        permits, at, lone1 = int(ARGV[argi + 1]), ARGV[argi + 2], true
        if op == 'K' then op = 't' else op = 'w' end
        argi = argi + 3
      else
        at, count = ARGV[argi + 1], 1
        if op == 'X' then op = 'x' else op = 'n' end
        argi = argi + 2
        leaseArgs = true
      end
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
    if lone1 then
      local c = specs[ARGV[argi]] or spec(ARGV[argi])
      out[r] = lone(c, KEYS[keyi], '', false, ARGV[argi + 1], op, permits, now)
      argi = argi + 2
      keyi = keyi + 1
    elseif short then
      -- The settings' cache read here first: a call of \`spec\` per decision is a hundredth of it.
      local text, key = ARGV[argi], KEYS[keyi]
      local c = specs[text] or spec(text)
      argi = argi + 1
      keyi = keyi + 1
      out[r] = lone(c, key, '', false, '', op, permits, now)
    elseif chain then
      -- Members that all keep two numbers (fixed windows, token buckets) are decided on reused arrays.
      local twos = true
      for j = 1, count do
        local text = ARGV[argi]
        local c = specs[text] or spec(text)
        PC[j], PK[j] = c, KEYS[keyi]
        if c.width ~= 2 or c.one then twos = false end
        argi = argi + 1
        keyi = keyi + 1
      end
      -- (pairChain leaves a chain with a locked member to the general path.)
      local res = twos and pairChain(op, permits, count, now)
      if res then
        out[r] = res
      else
        local ms, leases = {}, false
        for j = 1, count do
          local c = PC[j]
          if c.cc then leases = true end
          ms[j] = member(c, PK[j], '', false, '', now, true)
        end
        out[r] = settle(op, permits, ms, now, leases)
      end
    elseif op == 'x' or op == 'n' then
      -- A concurrency lease released or renewed: its own entry only, no member state read (a time-based member
      -- of the chain has nothing to give back, and is left to its next decision).
      -- (The short form \`X|N\` carries only the spec and the lease: \`leaseArgs\`.)
      for _ = 1, count do
        local text = ARGV[argi]
        local c, key = specs[text] or spec(text), KEYS[keyi]
        local lease
        if leaseArgs then
          lease = ARGV[argi + 1]
          argi = argi + 2
        else
          lease = ARGV[argi + 3]
          argi = argi + 4
        end
        if c.cc then
          if op == 'x' then call('ZREM', key, lease)
          elseif call('ZSCORE', key, lease) then holdLease(key, lease, now + c.leaseTtl, c.leaseTtl + c.pad) end
        end
        keyi = keyi + 1
      end
      out[r] = ''
    elseif count == 2 and (op == 'l' or op == 'g') then
      -- A token bucket's lease op: the bucket and its holders (see \`bucket-lease.ts\`).
      out[r] = bucketLease(op, permits, spec(ARGV[argi]), KEYS[keyi], KEYS[keyi + 1], ARGV[argi + 1], ARGV[argi + 3], ARGV[argi + 7], now)
      argi = argi + 8
      keyi = keyi + 2
    elseif (op == 'l' or op == 'g') and spec(ARGV[argi]).cc then
      -- A concurrency limiter's lease op: this process's entry (see \`permit-lease.ts\`).
      out[r] = permitLease(op, permits, spec(ARGV[argi]), KEYS[keyi], ARGV[argi + 3], now)
      argi = argi + 4
      keyi = keyi + 1
    elseif ADMIN[op] then
      out[r] = admin(op, permits, spec(ARGV[argi]), KEYS[keyi], ARGV[argi + 1], ARGV[argi + 3], now)
      argi = argi + 4
      keyi = keyi + 1
    else
      local c = count == 1 and (op == 't' or op == 'w') and spec(ARGV[argi])
      if c then
        out[r] = lone(c, KEYS[keyi], ARGV[argi + 1], ARGV[argi + 2] == '1', ARGV[argi + 3], op, permits, now)
        argi = argi + 4
        keyi = keyi + 1
      else
        -- Only tries and queued attempts are decided on known states: a peek or a refund reads Redis's.
        local speculate = op == 't' or op == 'w'
        local ms, leases = {}, false
        for j = 1, count do
          local c = spec(ARGV[argi])
          if c.cc then leases = true end
          ms[j] = member(c, KEYS[keyi], ARGV[argi + 1], ARGV[argi + 2] == '1', ARGV[argi + 3], now, speculate)
          argi = argi + 4
          keyi = keyi + 1
        end
        out[r] = settle(op, permits, ms, now, leases)
      end
    end
  end
  if requests == 1 then return out[1] end
  return concat(out, ';')
end
`;
