-- SECKILL.STATUS: a buyer's order id and its outcome from the sink, if any.
-- KEYS: meta, stock, buyers, outbox, result
-- ARGV: uid
-- Returns {} when the buyer has no order, else {order id, outcome or ""}.
local id = redis.call('HGET', KEYS[3], ARGV[1])
if not id then return {} end
return {id, redis.call('HGET', KEYS[5], id) or ''}
