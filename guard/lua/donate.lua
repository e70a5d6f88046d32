-- A donor bucket of a split sale gives units to a buyer whose home bucket had too few (the
-- buyer is reserved there: buy.lua's EMPTY), in one step: the decrement, the record of the
-- gift, and the order into this bucket's outbox, which names the buyer's home.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated (the donor bucket's)
-- ARGV: version, route, order id, uid, qty, home bucket's tag number, proxy instance
-- Returns one of:
--   {"OK", order id, version, remaining, outbox entry id or "", server time ms}
--     (the same order asked again is answered OK again, with no entry id, and sells nothing)
--   {"EMPTY", remaining}   too few units here: ask the next bucket
--   {"TOMB"}               the sweeper closed this order id to donations: give nothing
--   {"CLOSED", state}, {"STALE", version}, {"DRIFT", route}
local m = redis.call('HMGET', KEYS[1], 'state', 'version', 'route')
if m[1] ~= 'open' then return {'CLOSED', m[1] or 'not warmed'} end
if ARGV[1] ~= m[2] then return {'STALE', m[2]} end
if m[3] and m[3] ~= ARGV[2] and m[3] ~= ARGV[2] .. ' buckets=1' then return {'DRIFT', m[3]} end
local t = redis.call('TIME')
local now = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local prev = redis.call('HGET', KEYS[7], ARGV[3])
if prev == 'tomb' then return {'TOMB'} end
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
if prev then return {'OK', ARGV[3], m[2], tostring(stock), '', now} end
local qty = tonumber(ARGV[5])
if stock < qty then return {'EMPTY', tostring(stock)} end
redis.call('DECRBY', KEYS[2], qty)
redis.call('HSET', KEYS[7], ARGV[3], ARGV[6] .. ':' .. ARGV[5] .. ':' .. ARGV[4])
local entry = redis.call('XADD', KEYS[4], '*', 'order', ARGV[3], 'version', m[2], 'uid', ARGV[4],
  'qty', ARGV[5], 'ts', now, 'by', ARGV[7], 'home', ARGV[6])
return {'OK', ARGV[3], m[2], tostring(stock - qty), entry, now}
