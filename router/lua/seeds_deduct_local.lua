local key = KEYS[1]
local num = tonumber(ARGV[1])
local stock = tonumber(redis.call('GET', key) or 0)
if stock == nil then return -1 end
if stock < num then return 0 end
redis.call('DECRBY', key, num)
return 1
