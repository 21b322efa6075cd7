import { createHash } from 'node:crypto';
import { PRELUDE } from '../redis/lua/prelude.ts';

/**
 * What `floodgate keys` runs on one key, without the limiter's settings (the person on call has a Redis URL and a
 * limiter's name, not the code that built it): `ARGV[1]` the op — `i` inspect (answers `type,lockedFor,pttl,
 * held`: `string` for a window's or bucket's state, `zset` for a concurrency key, '' for none; held permits of a
 * concurrency key; a key whose type or contents are not floodgate's answers `foreign,<type>`), `l` lock (`ARGV[2]` ms, `ARGV[3]` the TTL pad), `u` unlock, `z` reset. The lock is written as
 * the store's `lock` writes it (the prelude's `lockedState`/`lockLeases`); on Redis's clock, as decisions are.
 */
const BODY = `
local function keyAdmin(KEYS, ARGV)
  bind()
  local key, op = KEYS[1], ARGV[1]
  local t = call('TIME')
  local now = seconds(t[1]) * 1000 + millis(t[2])
  local kind = call('TYPE', key).ok
  if kind == 'none' and op ~= 'l' then return '' end
  -- A key never seen, locked: the kind its limiter's other keys have (\`ARGV[4]\`).
  if kind == 'none' then kind = ARGV[4] end
  if kind ~= 'none' and kind ~= 'string' and kind ~= 'zset' then return 'foreign,' .. kind end
  if kind == 'zset' then call('ZREMRANGEBYSCORE', key, '-inf', num(now)) end
  local lockLeft, held = 0, 0
  local raw = kind == 'string' and call('GET', key)
  local under = raw
  if raw and byte(raw, 1) == LOCK_BYTE then
    local untilMs
    untilMs, under = lockEnd(raw)
    if untilMs > now then lockLeft = untilMs - now end
  end
  if under then
    -- A packed state is two or more numbers, the first a time on Redis's clock (a window's or segment's start,
    -- a bucket's stamp: milliseconds since 1970, past 10^12). Text is not: each ASCII byte reads as a small number.
    local ok, values = pcall(function() return { munpack(under) } end)
    if not ok or #values < 2 or type(values[1]) ~= 'number' or values[1] < 1e12 then return 'foreign,string' end
    for _, v in ipairs(values) do
      if type(v) ~= 'number' then return 'foreign,string' end
    end
  end
  if kind == 'zset' then
    local entries = call('ZRANGE', key, 0, -1, 'WITHSCORES')
    for i = 1, #entries, 2 do
      local n = tonumber(match(entries[i], '^(%d+):'))
      if not n then return 'foreign,zset' end
      if entries[i] == LOCK_ENTRY then lockLeft = tonumber(entries[i + 1]) - now
      elseif not match(entries[i], ':~charge$') then held = held + n end
    end
  end
  if op == 'i' then return kind .. ',' .. num(lockLeft) .. ',' .. call('PTTL', key) .. ',' .. num(held) end
  if op == 'z' then
    if kind == 'string' then call('DEL', key)
    else
      call('ZREM', key, LOCK_ENTRY)
      for _, v in ipairs(call('ZRANGE', key, 0, -1)) do
        if match(v, ':~charge$') then call('ZREM', key, v) end
      end
    end
  elseif op == 'u' then
    if kind == 'zset' then call('ZREM', key, LOCK_ENTRY)
    elseif raw ~= under then
      if under then call('SET', key, under, 'KEEPTTL') else call('DEL', key) end
    end
  elseif op == 'l' then
    local ms, pad = tonumber(ARGV[2]), tonumber(ARGV[3])
    if kind == 'zset' then lockLeases(key, now + ms, ceil(ms) + pad)
    else
      local ttl = max(call('PTTL', key), ceil(ms) + pad)
      call('SET', key, lockedState(now + ms, under), 'PX', ttl)
    end
  end
  return 'ok'
end
`;

/** The script's source, for `EVAL`/`EVALSHA`. */
export const KEYS_SCRIPT = `local SPECULATE = false\n${PRELUDE}\n${BODY}\nreturn keyAdmin(KEYS, ARGV)\n`;
/** Its SHA1. */
export const KEYS_SCRIPT_SHA = createHash('sha1').update(KEYS_SCRIPT).digest('hex');
