-- SECKILL.RELEASE: a cancelled or unpaid order gives its units back.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- ARGV: uid, rebuy ("1": the buyer may buy again), proxy instance, the proxy's route (as buy.lua)
-- Returns one of:
--   {"OK", order id, units given back, stock now, outbox entry id, server time ms, version, qty}
--   {"ALREADY", order id}   released before: nothing changes
--   {"NONE"}                the buyer has no order in this sale
--   {"RESERVED", order id}  the buyer's buy is still asking a split sale's other buckets
--   {"DRIFT", route}        the sale sends its orders elsewhere than this proxy would
-- Stock never goes above the sale's initial stock. A release event goes into the outbox, so
-- that the sink cancels the MySQL order and gives its stock back there too.
local v = redis.call('HGET', KEYS[3], ARGV[1])
if not v then return {'NONE'} end
local done = string.match(v, '^released:([^:]+)')
if done then return {'ALREADY', done} end
local pending = string.match(v, '^r:([^:]+)')
if pending then return {'RESERVED', pending} end
local id, qty = string.match(v, '^([^:]+):(%d+)$')
local m = redis.call('HMGET', KEYS[1], 'initial', 'version', 'route')
if m[3] and m[3] ~= ARGV[4] and m[3] ~= ARGV[4] .. ' buckets=1' then return {'DRIFT', m[3]} end
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
local back = tonumber(qty)
local room = tonumber(m[1] or '0') - stock
if back > room then back = room end
if back < 0 then back = 0 end
if back > 0 then redis.call('INCRBY', KEYS[2], back) end
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  redis.call('HSET', KEYS[3], ARGV[1], 'released:' .. v)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local entry = redis.call('XADD', KEYS[4], '*', 'type', 'release', 'order', id, 'version', m[2] or '0',
  'uid', ARGV[1], 'qty', qty, 'ts', tostring(now), 'by', ARGV[3])
return {'OK', id, tostring(back), tostring(stock + back), entry, tostring(now), m[2] or '0', qty}
