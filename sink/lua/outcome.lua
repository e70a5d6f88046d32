-- The sink's record of a batch's outcomes in one bucket of a sale (the buyers' home bucket,
-- the sale's own keys for a sale of one bucket), for SECKILL.STATUS and SECKILL.INFO, and for
-- the buyers who wait for theirs.
-- KEYS: meta, result, outcomes (of that bucket)
-- ARGV: how many entries the outcome stream keeps (about: sale.OutcomesKept), then for each
--       order, 9 values: order id, outcome ("confirmed", "cancelled", "rejected
--       <reason>"), the order's sale version, status ("confirmed", "rejected", "cancelled"),
--       count ("1": a new outcome), revoked ("1": a release cancelled a confirmed order),
--       uid, the outcome as STATUS tells it ("confirmed <id>", "rejected <id> <reason>"), and
--       the order's buy time (Redis's, in Unix ms; "0": unknown)
-- The outcomes are recorded in ARGV's order (a later one of the same order id wins; one the
-- result hash holds already is skipped, so that a call sent again counts nothing twice), and
-- appended to the outcome stream as one entry, uid -> as told. The new outcomes' delay from
-- their buy (Redis's time now less the buy's) goes into the meta, as the batch's mean and
-- most (stored_delay_ms, stored_delay_max_ms, stored_at_ms), for the sale page. The counts are the sale's now in Redis: an order of an earlier
-- sale, stored after a new sale was warmed, is recorded but not counted. Returns how many were
-- counted.
if #ARGV % 9 ~= 1 then
  return redis.error_reply('ERR outcome.lua takes the stream cap, then 9 values per order')
end
local first = tonumber(redis.call('HGET', KEYS[1], 'first_version') or '0')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields, told, incr, counted = {}, {}, {}, 0
local delays, delaySum, delayMax = 0, 0, 0
-- The outcomes the result hash holds already, read in one HMGET for the batch.
local ids = {}
for i = 2, #ARGV, 9 do ids[#ids + 1] = ARGV[i] end
local held = redis.call('HMGET', KEYS[2], unpack(ids))
local seen = {} -- a later outcome of the same order id in this call, against one set here
for i = 2, #ARGV, 9 do
  -- An outcome the result hash holds already (the same call sent again, its WAIT short) is
  -- neither counted nor streamed twice.
  local before = seen[ARGV[i]]
  if before == nil then before = held[(i - 2) / 9 + 1] end
  if before ~= ARGV[i + 1] then
    seen[ARGV[i]] = ARGV[i + 1]
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = ARGV[i + 1]
    told[#told + 1] = ARGV[i + 6]
    told[#told + 1] = ARGV[i + 7]
    if ARGV[i + 4] == '1' and tonumber(ARGV[i + 2]) >= first then
      incr[ARGV[i + 3]] = (incr[ARGV[i + 3]] or 0) + 1
      if ARGV[i + 5] == '1' then incr['confirmed'] = (incr['confirmed'] or 0) - 1 end
      counted = counted + 1
      local ts = tonumber(ARGV[i + 8]) or 0
      if ts > 0 and now >= ts then
        delays, delaySum, delayMax = delays + 1, delaySum + (now - ts), math.max(delayMax, now - ts)
      end
    end
  end
end
if delays > 0 then
  redis.call('HSET', KEYS[1], 'stored_delay_ms', math.floor(delaySum / delays), 'stored_delay_max_ms', delayMax, 'stored_at_ms', now)
end
if #fields > 0 then
  redis.call('HSET', KEYS[2], unpack(fields))
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[1], '*', unpack(told))
end
for status, n in pairs(incr) do
  if n ~= 0 then redis.call('HINCRBY', KEYS[1], status, n) end
end
return counted
