-- The sink's record of one order's outcome, for SECKILL.STATUS and SECKILL.INFO.
-- KEYS: meta, result (both tagged {<sku>})
-- ARGV: order id, outcome ("confirmed", "cancelled", "rejected <reason>"), the order's sale
--       version, status ("confirmed", "rejected", "cancelled"), count ("1": a new outcome),
--       revoked ("1": a release cancelled a confirmed order)
-- The counts are the sale's now in Redis: an order of an earlier sale, stored after a new sale
-- was warmed, is recorded but not counted.
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[5] ~= '1' then return 0 end
local first = tonumber(redis.call('HGET', KEYS[1], 'first_version') or '0')
if tonumber(ARGV[3]) < first then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[4], 1)
if ARGV[6] == '1' then redis.call('HINCRBY', KEYS[1], 'confirmed', -1) end
return 1
