-- The sweeper's question to one bucket of a split sale about an old reservation elsewhere:
-- did this bucket give the order its units? If not, it never will: the order id is closed to
-- donations here (a tombstone), in the same step.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated (the asked bucket's)
-- ARGV: order id
-- Returns "tomb", or the donation's record "<home tag>:<qty>:<uid>".
local v = redis.call('HGET', KEYS[7], ARGV[1])
if v then return v end
redis.call('HSET', KEYS[7], ARGV[1], 'tomb')
return 'tomb'
