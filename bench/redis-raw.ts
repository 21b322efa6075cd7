/**
 * The baseline of the Redis benchmarks ("raw", issue 13): rate-limit-redis 6's increment script, verbatim — a
 * real fixed window with no library around it, sent per call by EVALSHA.
 */
export const RAW_FIXED_WINDOW = `local windowMs = tonumber(ARGV[1])
local timeToExpire = redis.call("PTTL", KEYS[1])
if timeToExpire <= 0 then
  redis.call("SET", KEYS[1], 1, "PX", windowMs)
  return { 1, windowMs }
end
local totalHits = redis.call("INCR", KEYS[1])
return { totalHits, timeToExpire }`;
