/**
 * Lua shared by every algorithm: number formatting and the packed state. Answers leave the script as text, so a
 * number is written so it reads back into exactly the same double: whole numbers by Lua itself, fractions with
 * `%.17g`. States are stored with `cmsgpack` (doubles kept bit for bit, and parsed in C): the Redis store
 * answers the same fractions as memory.
 *
 * Known states: as a Function (Redis >= 7), the library remembers the last state it read or wrote under each
 * key (bounded), decides on it, and writes the result with `SET … GET KEEPTTL`, which answers the state Redis had:
 * when that is the one remembered (nearly always: the decisions on a key all run through this library), the
 * decision stands on one command instead of a `GET` and a `SET` — each command a script calls costs Redis more
 * than the decision's own arithmetic. When it is not (the key expired, another version or a script wrote it,
 * a failover), the write is undone (KEEPTTL kept the expiry) and the decision is made again on Redis's state.
 * So what Redis holds, and every answer, is what reading first would give. `SPECULATE` is false in the script
 * form (its body runs anew on every call, and Redis 6.0 has no `SET … GET`).
 */
export const PRELUDE: string = `
local EPSILON = 1e-9
-- The library functions used per decision, as upvalues bound by the first call: loading a Function sees none
-- of them, and at run time a global there is a miss in the library's own environment before the real one.
local floor, ceil, max, min, format, match, concat, byte, sub, tonumber, ipairs, unpack, mpack, munpack, call
local function bind()
  floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
  format, match, concat, byte, sub = string.format, string.match, table.concat, string.byte, string.sub
  tonumber, ipairs, unpack = _G.tonumber, _G.ipairs, _G.unpack
  mpack, munpack, call = cmsgpack.pack, cmsgpack.unpack, redis.call
end
local function num(x)
  if x ~= x then return '' end
  -- A whole number as an integer: exact, and printing an integer costs a fraction of printing a double.
  if x % 1 == 0 and x > -1e15 and x < 1e15 then return format('%d', x) end
  return format('%.17g', x)
end
-- The commonest counts compared as strings (interned: one pointer comparison each); tonumber parses with strtod,
-- costlier than the rest of a light decision's arithmetic. (No table of them: as a script, on Redis 6, the
-- whole body runs on every call and would fill it every time.)
local function int(s)
  if s == '1' then return 1 end
  if s == '2' then return 2 end
  return tonumber(s)
end
-- Redis TIME's two decimal strings, read digit by digit: tonumber (strtod) costs more than the rest of a
-- lone fixed-window decision's arithmetic. Seconds have 10 digits until 2286; microseconds are not padded.
local function seconds(text)
  if #text ~= 10 then return tonumber(text) end
  local a, b, c, d, e, f, g, h, i, j = byte(text, 1, 10)
  return a * 1e9 + b * 1e8 + c * 1e7 + d * 1e6 + e * 1e5 + f * 1e4 + g * 1e3 + h * 100 + i * 10 + j - 53333333328
end
local function millis(micros)
  local digits = #micros
  if digits == 6 then
    local a, b, c = byte(micros, 1, 3)
    return a * 100 + b * 10 + c - 5328
  end
  if digits == 5 then
    local a, b = byte(micros, 1, 2)
    return a * 10 + b - 528
  end
  if digits == 4 then return byte(micros, 1) - 48 end
  return 0
end
-- The last state this library read or wrote under a key (its packed string), at most KNOWN_LIMIT keys.
local KNOWN_LIMIT = 10000
local known, knownCount = {}, 0
local function remember(key, raw)
  if not SPECULATE then return end
  if known[key] == nil then
    if knownCount >= KNOWN_LIMIT then known, knownCount = {}, 0 end
    knownCount = knownCount + 1
  end
  known[key] = raw
end
-- The state last known under \`key\`, or nil (always, in the script form).
local function knownState(key)
  return SPECULATE and known[key]
end
-- A packed state's table, or nil: none, or one of another width.
local function unpacked(raw, width)
  if not raw then return nil end
  local s = { munpack(raw) }
  if #s ~= width then return nil end
  return s
end
-- An administrative lock (\`lock(key, duration)\`) on a time-based key: \`L\` and the lock's end (as text) packed
-- before the state, which follows unchanged (cmsgpack packs each value alone). A packed state starts with a
-- number, never a one-letter string: its first byte (0xa1) tells a locked key, read only from a state read
-- from Redis (a known state is never a locked one). A concurrency key holds its lock as the entry LOCK_ENTRY,
-- scored by the lock's end. Neither costs an unlocked key a command.
local LOCK_BYTE = 161
local LOCK_ENTRY = '0:~lock'
-- A locked state's end and the state under it (false: none).
local function lockEnd(raw)
  local n = byte(raw, 3) - 160
  local rest = sub(raw, 4 + n)
  return tonumber(sub(raw, 4, 3 + n)), rest ~= '' and rest
end
-- \`under\` (a packed state, or false) locked until \`untilMs\`.
local function lockedState(untilMs, under)
  return mpack('L', num(untilMs)) .. (under or '')
end
-- A concurrency key locked until \`untilMs\`, kept at least \`ttl\` ms.
local function lockLeases(key, untilMs, ttl)
  call('ZADD', key, num(untilMs), LOCK_ENTRY)
  if call('PTTL', key) < ttl then call('PEXPIRE', key, ttl) end
end
-- The rejection of member j by a lock \`left\` ms before its end: remaining 0 and reset at its end, so the
-- header fields agree with Retry-After; the trailing \`L\` says why.
local function lockedText(j, left)
  local t = num(left)
  return '0,' .. j .. ',' .. t .. ',' .. t .. ',0,' .. t .. ',L'
end
-- A grant's answer \`1,remaining,reset\`: both whole (the common case) in one format call, where writing each
-- number alone and then joining them makes a string per number.
local function grantedText(left, reset)
  if left % 1 == 0 and reset % 1 == 0 and left < 1e15 and left > -1e15 and reset < 1e15 and reset > -1e15 then
    return format('1,%d,%d', left, reset)
  end
  return '1,' .. num(left) .. ',' .. num(reset)
end
-- \`a,b\` as \`num\` writes each, in one format call when both are whole.
local function pairText(a, b)
  if a % 1 == 0 and b % 1 == 0 and a < 1e15 and a > -1e15 and b < 1e15 and b > -1e15 then
    return format('%d,%d', a, b)
  end
  return num(a) .. ',' .. num(b)
end
`;
