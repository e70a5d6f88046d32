-- SECKILL.WARM's write: stock and meta in one step, the sale left in state "warming".
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated (of the sale, or of one of its
--   stock buckets: a split sale runs it once per bucket)
-- ARGV: version, MySQL's stock (this bucket's share of it), start ms, end ms, per-user limit,
--   force ("1" or "0"), rate (buys a second, 0 for none), burst; the rate's bucket starts
--   full; the warming proxy's route (sale.Route), which every proxy's buys must then match;
--   the sale's buckets' tag numbers ("0" for one bucket, "0,3,7" for three: sale.FormatBuckets)
-- Returns one of:
--   {"OK", stock, units in flight}
--   {"OPEN", version}     the sale is open (or mid-warm) and force was not given
--   {"STALE", version}    a newer warm already ran
--   {"ENDED", now ms}     the end given is not after Redis's clock
-- The stock is MySQL's less the units in flight: sold in Redis, but not yet in MySQL (no
-- outcome from the sink yet), whether they still wait in the outbox or in Kafka. MySQL's
-- stock goes down by those once the sink has them, so counting them twice would sell them
-- again. A new sale (the previous one is not open) then forgets the previous buyers,
-- outcomes and counts; a forced re-warm of an open sale keeps them, so nobody buys twice. The
-- outbox is never touched: its orders still go to Kafka.
local m = redis.call('HMGET', KEYS[1], 'state', 'version')
local state, cur = m[1], tonumber(m[2] or '0')
local force = ARGV[6] == '1'
if cur >= tonumber(ARGV[1]) then return {'STALE', tostring(cur)} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = tonumber(ARGV[4])
if ends > 0 and ends <= now then return {'ENDED', tostring(now)} end
local open = state == 'open' or state == 'warming'
if open and not force then return {'OPEN', tostring(cur)} end
local inflight = 0
local buyers = redis.call('HGETALL', KEYS[3])
for i = 2, #buyers, 2 do
  -- a reservation ("r:<id>:<qty>") counts too: a donor bucket may have sold it
  local id, qty = string.match(buyers[i], '^r:([^:]+):(%d+)$')
  if not id then id, qty = string.match(buyers[i], '^([^:]+):(%d+)$') end
  if id and id ~= 'released' and redis.call('HEXISTS', KEYS[5], id) == 0 then
    inflight = inflight + tonumber(qty)
  end
end
local stock = tonumber(ARGV[2]) - inflight
if stock < 0 then stock = 0 end
if not open then
  redis.call('DEL', KEYS[3], KEYS[5], KEYS[6], KEYS[7])
  -- the first version of this sale (a forced re-warm keeps it), and the sink's counts
  redis.call('HSET', KEYS[1], 'first_version', ARGV[1], 'confirmed', 0, 'rejected', 0, 'cancelled', 0)
end
redis.call('SET', KEYS[2], stock)
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'initial', stock, 'start', ARGV[3],
  'end', ARGV[4], 'limit', ARGV[5], 'state', 'warming',
  'rate', ARGV[7], 'burst', ARGV[8], 'tokens', ARGV[8], 'ts', tostring(now), 'route', ARGV[9], 'buckets', ARGV[10])
return {'OK', tostring(stock), tostring(inflight)}
