-- SECKILL.WARM's write: stock and meta in one step, the sale left in state "warming".
-- KEYS: meta, stock, buyers, outbox, result
-- ARGV: version, stock, start ms, end ms, per-user limit, force ("1" or "0")
-- Returns one of:
--   {"OK", stock}
--   {"OPEN", version}     the sale is open (or mid-warm) and force was not given
--   {"BACKLOG", length}   the outbox holds unpublished orders and force was not given
--   {"STALE", version}    a newer warm already ran
-- A new sale (the previous one is not open) forgets the previous buyers, outcomes and counts; a forced
-- re-warm of an open sale keeps them, so nobody buys twice. The outbox is never touched: its
-- orders still go to Kafka.
local m = redis.call('HMGET', KEYS[1], 'state', 'version')
local state, cur = m[1], tonumber(m[2] or '0')
local force = ARGV[6] == '1'
if cur >= tonumber(ARGV[1]) then return {'STALE', tostring(cur)} end
local open = state == 'open' or state == 'warming'
if open and not force then return {'OPEN', tostring(cur)} end
local backlog = redis.call('XLEN', KEYS[4])
if backlog > 0 and not force then return {'BACKLOG', tostring(backlog)} end
if not open then
  redis.call('DEL', KEYS[3], KEYS[5])
  -- the first version of this sale (a forced re-warm keeps it), and the sink's counts
  redis.call('HSET', KEYS[1], 'first_version', ARGV[1], 'confirmed', 0, 'rejected', 0, 'cancelled', 0)
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'initial', ARGV[2], 'start', ARGV[3],
  'end', ARGV[4], 'limit', ARGV[5], 'state', 'warming')
return {'OK', ARGV[2]}
