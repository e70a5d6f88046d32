-- The sink's record of a batch's outcomes in one bucket of a sale (the buyers' home bucket,
-- the sale's own keys for a sale of one bucket), for SECKILL.STATUS and SECKILL.INFO.
-- KEYS: meta, result (of that bucket)
-- ARGV: for each order, 6 values: order id, outcome ("confirmed", "cancelled", "rejected
--       <reason>"), the order's sale version, status ("confirmed", "rejected", "cancelled"),
--       count ("1": a new outcome), revoked ("1": a release cancelled a confirmed order)
-- The outcomes are recorded in ARGV's order (a later one of the same order id wins). The
-- counts are the sale's now in Redis: an order of an earlier sale, stored after a new sale
-- was warmed, is recorded but not counted. Returns how many were counted.
if #ARGV % 6 ~= 0 then
  return redis.error_reply('ERR outcome.lua takes 6 values per order')
end
local first = tonumber(redis.call('HGET', KEYS[1], 'first_version') or '0')
local fields, incr, counted = {}, {}, 0
for i = 1, #ARGV, 6 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
  if ARGV[i + 4] == '1' and tonumber(ARGV[i + 2]) >= first then
    incr[ARGV[i + 3]] = (incr[ARGV[i + 3]] or 0) + 1
    if ARGV[i + 5] == '1' then incr['confirmed'] = (incr['confirmed'] or 0) - 1 end
    counted = counted + 1
  end
end
if #fields > 0 then redis.call('HSET', KEYS[2], unpack(fields)) end
for status, n in pairs(incr) do
  if n ~= 0 then redis.call('HINCRBY', KEYS[1], status, n) end
end
return counted
