-- Ends a reservation at a split sale's home bucket (buy.lua's EMPTY): "confirm" turns it into
-- the buyer's order (a donor bucket sold it), "drop" removes it (no bucket had the units).
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated (the home bucket's)
-- ARGV: uid, order id, qty, "confirm" or "drop"
-- Returns {"OK"}, or {"GONE", the buyer's value or ""} when the reservation was ended before
-- (by the sweeper, which settles one that a proxy left).
local want = 'r:' .. ARGV[2] .. ':' .. ARGV[3]
local v = redis.call('HGET', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[2] .. ':' .. ARGV[3] .. ':' .. ARGV[1])
if v ~= want then return {'GONE', v or ''} end
if ARGV[4] == 'confirm' then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ':' .. ARGV[3])
else
  redis.call('HDEL', KEYS[3], ARGV[1])
end
return {'OK'}
