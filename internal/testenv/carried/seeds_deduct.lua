local key = KEYS[1] -- the item's stock
local num = tonumber(ARGV[1]) -- how many
local stock = tonumber(redis.call('GET', key) or 0)
if stock == nil then return -1 end -- no such item
if stock < num then return 0 end -- not enough left
redis.call('DECRBY', key, num)
return 1
