#!lua flags=allow-cross-slot-keys
-- The tee's deletes of outbox entries Kafka has acknowledged, for many buckets in one call on
-- one master. The keys are not declared: every bucket's outbox must be on this node (the
-- caller groups the tags by master), named as package sale names them: <prefix><tag>}:outbox.
-- ARGV[1]: the prefix ("seckill:{"); then for each bucket: its tag, the count n of its entry
-- ids, and the n ids (a loop over the request only).
-- Returns one value per bucket: the entries deleted, or "!" and the error for a bucket whose
-- outbox could not be touched (its slot moved away: the caller deletes those the slow way).
local out = {}
local i = 2
while i <= #ARGV do
  local tag, n = ARGV[i], tonumber(ARGV[i + 1])
  if not n or n < 1 or i + 1 + n > #ARGV then
    return redis.error_reply('ERR xdel.lua takes a prefix, then per bucket: tag, count, ids')
  end
  local r = redis.pcall('XDEL', ARGV[1] .. tag .. '}:outbox', unpack(ARGV, i + 2, i + 1 + n))
  if type(r) == 'table' and r.err then r = '!' .. r.err end
  out[#out + 1] = r
  i = i + 2 + n
end
return out
