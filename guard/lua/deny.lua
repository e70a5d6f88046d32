-- SECKILL.DENY and SECKILL.ALLOW: the deny list, a sorted set uid -> expiry (Redis's clock,
-- ms; +inf for none), and its version, which every change bumps so that proxies re-read it.
-- KEYS: the set, the version
-- ARGV: "deny", uid, ttl ms (0: none), most entries   or   "allow", uid
-- Returns {"OK", entries} ({"OK", 0|1 removed} for allow), or {"FULL", entries}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[1] == 'allow' then
  local n = redis.call('ZREM', KEYS[1], ARGV[2])
  if n > 0 then redis.call('INCR', KEYS[2]) end
  return {'OK', n}
end
local n = redis.call('ZCARD', KEYS[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) and n >= tonumber(ARGV[4]) then
  return {'FULL', n}
end
local ttl = tonumber(ARGV[3])
local expiry = '+inf'
if ttl > 0 then expiry = tostring(now + ttl) end
redis.call('ZADD', KEYS[1], expiry, ARGV[2])
redis.call('INCR', KEYS[2])
return {'OK', redis.call('ZCARD', KEYS[1])}
