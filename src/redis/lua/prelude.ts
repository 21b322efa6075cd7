/**
 * Lua shared by every algorithm: number formatting and the packed state. Redis turns a Lua number into an
 * integer reply (truncating it), so a fraction leaves the script as a string written with `%.17g`, which reads back
 * into exactly the same double (whole numbers go as integer replies). States are stored with `cmsgpack` (doubles kept bit for bit, and parsed in
 * C): the Redis store answers the same fractions as memory.
 */
export const PRELUDE = `
local EPSILON = 1e-9
-- The library functions used per decision, as upvalues bound by the first call: loading a Function sees none
-- of them, and at run time a global there is a miss in the library's own environment before the real one.
local floor, ceil, max, min, format, match, tonumber, tostring, ipairs, unpack, mpack, munpack, call
local function bind()
  floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
  format, match = string.format, string.match
  tonumber, tostring, ipairs, unpack = _G.tonumber, _G.tostring, _G.ipairs, _G.unpack
  mpack, munpack, call = cmsgpack.pack, cmsgpack.unpack, redis.call
end
local function num(x)
  if x ~= x then return '' end
  -- A whole number goes back as an integer reply (exact below 2^53, and no string formatting to pay for).
  if x == floor(x) and x > -9007199254740992 and x < 9007199254740992 then return x end
  return format('%.17g', x)
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
