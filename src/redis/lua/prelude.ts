/**
 * Lua shared by every algorithm: number formatting and the packed state. Redis turns a Lua number into an
 * integer reply (truncating it), so every number leaves the script as a string written with `%.17g`, which reads
 * back into exactly the same double. States are stored with `cmsgpack` (doubles kept bit for bit, and parsed in
 * C): the Redis store answers the same fractions as memory.
 */
export const PRELUDE = `
local EPSILON = 1e-9
local function num(x)
  if x ~= x then return '' end
  if x == math.floor(x) and x > -1e15 and x < 1e15 then return string.format('%d', x) end
  return string.format('%.17g', x)
end
local function readState(key, width)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local s = { cmsgpack.unpack(raw) }
  if #s ~= width then return nil end
  return s
end
local function writeState(key, s, ttl)
  redis.call('SET', key, cmsgpack.pack(unpack(s)), 'PX', ttl)
end
`;
