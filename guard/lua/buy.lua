-- SECKILL.BUY, as one atomic step on the SKU's slot.
-- KEYS: meta, stock, buyers, outbox, result (all tagged {<sku>})
-- buyers maps uid -> "<order id>:<qty>".
-- ARGV: version the proxy expects ("" for any), uid, qty, order id, proxy instance
-- Returns one of:
--   {"OK", order id, version, remaining, outbox entry id, server time ms}
--   {"DUPLICATE", existing order id}
--   {"SOLDOUT", remaining}
--   {"CLOSED", why}
--   {"STALE", current version}   the proxy's version is old: it retries with the current one
--   {"LIMIT", per-user limit}
local m = redis.call('HMGET', KEYS[1], 'state', 'version', 'start', 'end', 'limit')
local state, version = m[1], m[2]
if not state then return {'CLOSED', 'not warmed'} end
if state ~= 'open' then return {'CLOSED', state} end
if ARGV[1] ~= '' and ARGV[1] ~= version then return {'STALE', version} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(m[3]) then return {'CLOSED', 'not started'} end
local ends = tonumber(m[4])
if ends > 0 and now >= ends then return {'CLOSED', 'ended'} end
local prev = redis.call('HGET', KEYS[3], ARGV[2])
if prev then
  -- "<order id>:<qty>", or "released:<order id>:<qty>" when a released buyer may not buy again
  return {'DUPLICATE', string.match(prev, '^released:([^:]+)') or string.match(prev, '^([^:]+)')}
end
local qty = tonumber(ARGV[3])
if qty > tonumber(m[5]) then return {'LIMIT', m[5]} end
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
if stock < qty then return {'SOLDOUT', tostring(stock)} end
redis.call('DECRBY', KEYS[2], qty)
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4] .. ':' .. ARGV[3])
local entry = redis.call('XADD', KEYS[4], '*', 'order', ARGV[4], 'version', version, 'uid', ARGV[2],
  'qty', ARGV[3], 'ts', tostring(now), 'by', ARGV[5])
return {'OK', ARGV[4], version, tostring(stock - qty), entry, tostring(now)}
