/**
 * Lua shared by every algorithm: number formatting and the packed state string. Redis turns a Lua number into
 * an integer reply (truncating it), so every number leaves the script as a string written with `%.17g`, which
 * reads back into exactly the same double: the Redis store answers the same fractions as memory.
 */
export const PRELUDE = `
local EPSILON = 1e-9
local function num(x)
  if x ~= x then return '' end
  return string.format('%.17g', x)
end
local function readState(key, width)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local s, i = {}, 0
  for v in string.gmatch(raw, '[^ ]+') do
    i = i + 1
    s[i] = tonumber(v)
  end
  if i ~= width then return nil end
  return s
end
local function writeState(key, s, width, ttl)
  local parts = {}
  for i = 1, width do parts[i] = string.format('%.17g', s[i]) end
  redis.call('SET', key, table.concat(parts, ' '), 'PX', ttl)
end
`;
