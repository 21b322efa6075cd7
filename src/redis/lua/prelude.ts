/**
 * Lua shared by every algorithm: number formatting and the packed state. Answers leave the script as text, so a
 * number is written so it reads back into exactly the same double: whole numbers by Lua itself, fractions with
 * `%.17g`. States are stored with `cmsgpack` (doubles kept bit for bit, and parsed in C): the Redis store
 * answers the same fractions as memory.
 */
export const PRELUDE = `
local EPSILON = 1e-9
-- The library functions used per decision, as upvalues bound by the first call: loading a Function sees none
-- of them, and at run time a global there is a miss in the library's own environment before the real one.
local floor, ceil, max, min, format, match, concat, byte, tonumber, ipairs, unpack, mpack, munpack, call
local function bind()
  floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
  format, match, concat, byte = string.format, string.match, table.concat, string.byte
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
local function readState(key, width)
  local raw = call('GET', key)
  if not raw then return nil end
  local s = { munpack(raw) }
  if #s ~= width then return nil end
  return s
end
local function writeState(key, s, ttl, keepTtl)
  if keepTtl then
    call('SET', key, mpack(unpack(s)), 'KEEPTTL')
  else
    call('SET', key, mpack(unpack(s)), 'PX', ttl)
  end
end
`;
