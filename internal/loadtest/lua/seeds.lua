-- The seeds' in-app buy, kept for comparison (scripts/bench.sh, row c), with their key names
-- given one hash tag so that it runs on a cluster at all.
-- KEYS: stock, users   ARGV: uid
-- Returns 1 success, 0 sold out, -1 duplicate.
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return -1 end
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then return 0 end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
