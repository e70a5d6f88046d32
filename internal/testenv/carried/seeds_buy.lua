local stock_key = KEYS[1] -- the item's stock
local buyers_key = KEYS[2] -- who bought
local uid = ARGV[1] -- the buyer
local quantity = tonumber(ARGV[2]) -- how many
if redis.call('HEXISTS', buyers_key, uid) == 1 then -- a repeat buyer
return -1
end
local current_stock = tonumber(redis.call('GET', stock_key) or "0") -- what is left
if current_stock < quantity then
return 0 -- sold out
end
redis.call('DECRBY', stock_key, quantity) -- take it
redis.call('HSET', buyers_key, uid, 1) -- remember the buyer
return 1
