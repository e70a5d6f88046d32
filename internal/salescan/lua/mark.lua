-- Marks stock buckets as having, or about to have, outbox entries or reservations: the
-- sweeper of their route reads those every sweep, and the others only in its full sweeps.
-- KEYS[1]: the route's pending set (a sorted set tag -> when last marked, Redis's ms).
-- ARGV: the tags (a loop over the request only).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #ARGV do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
end
return #ARGV
