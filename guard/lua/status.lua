-- SECKILL.STATUS: buyers' order ids and their outcomes from the sink, if any; one buyer, or
-- the many whose waits began together (guard/statusbatch.go).
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- ARGV: uids
-- Returns {buckets, then for each uid: order id, outcome or "", released "1"/"0"}, with ""
-- for all three when the buyer has no order here: buckets is the meta's (a split sale's
-- tags), by which the caller checks that it asked the buyers' home bucket, or "!nosale" when
-- the bucket has neither a meta nor a buyer: no sale, and nothing any buyer could be told.
local buckets = redis.call('HGET', KEYS[1], 'buckets')
if not buckets and redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then buckets = '!nosale' end
local out = {buckets or ''}
for i = 1, #ARGV do
  local v = redis.call('HGET', KEYS[3], ARGV[i])
  if not v then
    out[#out + 1], out[#out + 2], out[#out + 3] = '', '', ''
  else
    local released = '0'
    local id = string.match(v, '^released:([^:]+)')
    if id then released = '1' else id = string.match(v, '^r:([^:]+)') or string.match(v, '^([^:]+)') end
    out[#out + 1], out[#out + 2], out[#out + 3] = id, redis.call('HGET', KEYS[5], id) or '', released
  end
end
return out
