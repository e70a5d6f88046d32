-- SECKILL.STATUS: a buyer's order id and its outcome from the sink, if any.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- ARGV: uid
-- Returns {"", "", "", buckets} when the buyer has no order here, else {order id, outcome or "",
-- released "1"/"0", buckets}: buckets is the meta's (a split sale's tags), by which the caller
-- checks that it asked the buyer's home bucket.
local buckets = redis.call('HGET', KEYS[1], 'buckets') or ''
local v = redis.call('HGET', KEYS[3], ARGV[1])
if not v then return {'', '', '', buckets} end
local released = '0'
local id = string.match(v, '^released:([^:]+)')
if id then released = '1' else id = string.match(v, '^r:([^:]+)') or string.match(v, '^([^:]+)') end
return {id, redis.call('HGET', KEYS[5], id) or '', released, buckets}
