-- SECKILL.CLOSE: ends a sale early.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- Returns {"OK", previous state, version}, or {"NONE"} if the SKU was never warmed.
local m = redis.call('HMGET', KEYS[1], 'state', 'version')
if not m[1] then return {'NONE'} end
redis.call('HSET', KEYS[1], 'state', 'closed')
return {'OK', m[1], m[2]}
