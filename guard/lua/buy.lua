-- SECKILL.BUY for one or more buys of one SKU, as one atomic step on the SKU's slot, or on
-- one stock bucket's of a split sale (the buyers' home bucket). This file defines buy(KEYS,
-- ARGV); the script that runs is this text and "return buy(KEYS, ARGV)" (one SKU, its keys
-- declared), or this text under buymany.lua (many SKUs of one master in one call).
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated (all of one hash tag)
-- buyers maps uid -> "<order id>:<qty>", or "r:<order id>:<qty>" while a donor bucket is asked
-- for the units of a buyer whose home bucket had too few (see donate.lua).
-- ARGV: version the proxy expects ("" for any), the proxy's route (sale.Route: its Kafka topic
-- and message version), donors ("1": another bucket of a split sale may still have units, so
-- a buyer this bucket cannot serve is reserved; "0": as far as the proxy knows none has, so
-- the buyer is told SOLDOUT at once), then for each buy: uid, qty, order id, proxy instance.
-- The buys run in that order, each exactly as if it ran alone, so a buyer who appears twice
-- gets DUPLICATE the second time.
-- Returns an array with one reply per buy, in order, each one of:
--   {"OK", order id, version, remaining, outbox entry id, server time ms}
--   {"DUPLICATE", existing order id}
--   {"SOLDOUT", remaining}
--   {"CLOSED", why}
--   {"STALE", current version, buckets}   the proxy's version is old (or "" for a split sale,
--                                whose buckets the proxy must know): it retries with them
--   {"EMPTY", order id, version, remaining}  a split sale's home bucket has too few units: the
--                                buyer is reserved here, and the proxy asks the other buckets
--   {"RESERVED", order id}        the buyer's earlier buy is still asking the other buckets
--   {"LIMIT", per-user limit}
--   {"DRIFT", the sale's route}  the sale sends its orders elsewhere than this proxy would
local function decide(KEYS, ARGV)
  local buys = (#ARGV - 3) / 4
  if buys < 1 or buys ~= math.floor(buys) then
    return redis.error_reply('ERR buy.lua takes a version, a route, donors and then uid, qty, order id, instance per buy')
  end
  local function all(reply)
    local out = {}
    for i = 1, buys do out[i] = reply end
    return out
  end
  local m = redis.call('HMGET', KEYS[1], 'state', 'version', 'start', 'end', 'limit', 'route', 'buckets')
  local state, version = m[1], m[2]
  if not state then return all({'CLOSED', 'not warmed'}) end
  if state ~= 'open' then return all({'CLOSED', state}) end
  local split = m[7] and string.find(m[7], ',', 1, true) ~= nil
  local donors = split and ARGV[3] == '1'
  if (ARGV[1] ~= '' and ARGV[1] ~= version) or (ARGV[1] == '' and split) then
    return all({'STALE', version, m[7] or ''})
  end
  -- a sale warmed before routes were recorded has none, and any proxy may sell it; a split
  -- sale's route carries " buckets=1", which a proxy that knows no buckets does not match
  if m[6] and m[6] ~= ARGV[2] and m[6] ~= ARGV[2] .. ' buckets=1' then return all({'DRIFT', m[6]}) end
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
  for b = 1, buys do uids[b] = ARGV[4 * b] end
  local prevs = redis.call('HMGET', KEYS[3], unpack(uids))
  local mine = {}   -- uid -> order id, sold in this call
  local sold = {}   -- indexes of the buys sold, in order
  local fields = {} -- uid, "<order id>:<qty>", ... for HSET
  local taken = 0
  local reserved = {} -- ms, "<order id>:<qty>:<uid>", ... for ZADD
  local out = {}
  for b = 1, buys do
    local uid, q, id = uids[b], ARGV[4 * b + 1], ARGV[4 * b + 2]
    local qty = tonumber(q)
    local prev = prevs[b]
    if mine[uid] then
      out[b] = {'DUPLICATE', mine[uid]}
    elseif prev and string.sub(prev, 1, 2) == 'r:' then
      out[b] = {'RESERVED', string.match(prev, '^r:([^:]+)')}
    elseif prev then
      -- "<order id>:<qty>", or "released:<order id>:<qty>" when a released buyer may not buy again
      out[b] = {'DUPLICATE', string.match(prev, '^released:([^:]+)') or string.match(prev, '^([^:]+)')}
    elseif qty > limit then
      out[b] = {'LIMIT', m[5]}
    elseif stock < qty and donors then
      mine[uid] = id
      fields[#fields + 1] = uid
      fields[#fields + 1] = 'r:' .. id .. ':' .. q
      reserved[#reserved + 1] = ts
      reserved[#reserved + 1] = id .. ':' .. q .. ':' .. uid
      out[b] = {'EMPTY', id, version, tostring(stock)}
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
  local wrote = taken > 0 or #fields > 0 or #reserved > 0
  -- The decrement comes first: should a later write fail, stock is lost, never oversold.
  if taken > 0 then redis.call('DECRBY', KEYS[2], taken) end
  if #fields > 0 then redis.call('HSET', KEYS[3], unpack(fields)) end
  if #reserved > 0 then redis.call('ZADD', KEYS[6], unpack(reserved)) end
  if taken > 0 then
    for _, b in ipairs(sold) do
      out[b][5] = redis.call('XADD', KEYS[4], '*', 'order', ARGV[4 * b + 2], 'version', version,
        'uid', uids[b], 'qty', ARGV[4 * b + 1], 'ts', ts, 'by', ARGV[4 * b + 3])
    end
  end
  return out, wrote
end

-- A call that wrote nothing (every buy DUPLICATE, SOLDOUT, CLOSED...) still writes, with no
-- data: the sale's fence key, set and deleted. WAIT counts a connection's last write, so the
-- WAIT after this call then covers what it read, and a DUPLICATE's order id or a SOLDOUT is
-- told only once a replica holds what it rests on.
local function buy(KEYS, ARGV)
  local out, wrote = decide(KEYS, ARGV)
  if not wrote and not out.err then
    local fence = string.sub(KEYS[1], 1, -5) .. 'fence'
    redis.call('SET', fence, '1')
    redis.call('DEL', fence)
  end
  return out
end
