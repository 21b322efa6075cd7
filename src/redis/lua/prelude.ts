/**
 * Lua shared by every algorithm: number formatting and the packed state. Redis turns a Lua number into an
 * integer reply (truncating it), so a fraction leaves the script as a string written with `%.17g`, which reads back
 * into exactly the same double (whole numbers go as integer replies). States are stored with `cmsgpack` (doubles kept bit for bit, and parsed in
 * C): the Redis store answers the same fractions as memory.
 */
export const PRELUDE = `
local EPSILON = 1e-9
local function num(x)
  if x ~= x then return '' end
  -- A whole number goes back as an integer reply (exact below 2^53, and no string formatting to pay for).
  if x == math.floor(x) and x > -9007199254740992 and x < 9007199254740992 then return x end
  return string.format('%.17g', x)
end
local function readState(key, width)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local s = { cmsgpack.unpack(raw) }
  if #s ~= width then return nil end
  return s
end
local function writeState(key, s, ttl, keepTtl)
  if keepTtl then
    redis.call('SET', key, cmsgpack.pack(unpack(s)), 'KEEPTTL')
  else
    redis.call('SET', key, cmsgpack.pack(unpack(s)), 'PX', ttl)
  end
end
`;
