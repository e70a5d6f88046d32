if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return -1 end
local current_stock = tonumber(redis.call('GET', KEYS[1]) or "0")
if current_stock < tonumber(ARGV[2]) then return 0 end
redis.call('DECRBY', KEYS[1], tonumber(ARGV[2]))
redis.call('HSET', KEYS[2], ARGV[1], 1)
return 1
