-- SECKILL.BUY for one or more buys of one SKU, as one atomic step on the SKU's slot.
-- KEYS: meta, stock, buyers, outbox, result (all tagged {<sku>})
-- buyers maps uid -> "<order id>:<qty>".
-- ARGV: version the proxy expects ("" for any), the proxy's route (sale.Route: its Kafka topic
-- and message version), then for each buy: uid, qty, order id, proxy instance. The buys run in that order, each exactly as if it ran alone, so a buyer who
-- appears twice gets DUPLICATE the second time.
-- Returns an array with one reply per buy, in order, each one of:
--   {"OK", order id, version, remaining, outbox entry id, server time ms}
--   {"DUPLICATE", existing order id}
--   {"SOLDOUT", remaining}
--   {"CLOSED", why}
--   {"STALE", current version}   the proxy's version is old: it retries with the current one
--   {"LIMIT", per-user limit}
--   {"DRIFT", the sale's route}  the sale sends its orders elsewhere than this proxy would
local buys = (#ARGV - 2) / 4
if buys < 1 or buys ~= math.floor(buys) then
  return redis.error_reply('ERR buy.lua takes a version, a route and then uid, qty, order id, instance per buy')
end
local function all(reply)
  local out = {}
  for i = 1, buys do out[i] = reply end
  return out
end
local m = redis.call('HMGET', KEYS[1], 'state', 'version', 'start', 'end', 'limit', 'route')
local state, version = m[1], m[2]
if not state then return all({'CLOSED', 'not warmed'}) end
if state ~= 'open' then return all({'CLOSED', state}) end
if ARGV[1] ~= '' and ARGV[1] ~= version then return all({'STALE', version}) end
-- a sale warmed before routes were recorded has none, and any proxy may sell it
if m[6] and m[6] ~= ARGV[2] then return all({'DRIFT', m[6]}) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(m[3]) then return all({'CLOSED', 'not started'}) end
local ends = tonumber(m[4])
if ends > 0 and now >= ends then return all({'CLOSED', 'ended'}) end
local limit = tonumber(m[5])
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
local ts = tostring(now)
-- One read of every buyer, one decrement and one write of the new buyers for the whole call;
-- a buyer sold earlier in this call counts as a duplicate like one sold before it.
local uids = {}
for b = 1, buys do uids[b] = ARGV[4 * b - 1] end
local prevs = redis.call('HMGET', KEYS[3], unpack(uids))
local mine = {}   -- uid -> order id, sold in this call
local sold = {}   -- indexes of the buys sold, in order
local fields = {} -- uid, "<order id>:<qty>", ... for HSET
local taken = 0
local out = {}
for b = 1, buys do
  local uid, q, id = uids[b], ARGV[4 * b], ARGV[4 * b + 1]
  local qty = tonumber(q)
  local prev = prevs[b]
  if mine[uid] then
    out[b] = {'DUPLICATE', mine[uid]}
  elseif prev then
    -- "<order id>:<qty>", or "released:<order id>:<qty>" when a released buyer may not buy again
    out[b] = {'DUPLICATE', string.match(prev, '^released:([^:]+)') or string.match(prev, '^([^:]+)')}
  elseif qty > limit then
    out[b] = {'LIMIT', m[5]}
  elseif stock < qty then
    out[b] = {'SOLDOUT', tostring(stock)}
  else
    stock = stock - qty
    taken = taken + qty
    mine[uid] = id
    sold[#sold + 1] = b
    fields[#fields + 1] = uid
    fields[#fields + 1] = id .. ':' .. q
    out[b] = {'OK', id, version, tostring(stock), false, ts}
  end
end
if taken > 0 then
  -- The decrement comes first: should a later write fail, stock is lost, never oversold.
  redis.call('DECRBY', KEYS[2], taken)
  redis.call('HSET', KEYS[3], unpack(fields))
  for _, b in ipairs(sold) do
    out[b][5] = redis.call('XADD', KEYS[4], '*', 'order', ARGV[4 * b + 1], 'version', version,
      'uid', uids[b], 'qty', ARGV[4 * b], 'ts', ts, 'by', ARGV[4 * b + 2])
  end
end
return out
