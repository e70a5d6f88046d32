-- Marks stock buckets as having, or about to have, outbox entries or reservations, and
-- orders that await their outcome: the sweeper of their route, and the late-order watch, read
-- those every pass, and the others only in their full passes.
-- KEYS: the sorted sets to mark in (tag -> when last marked, Redis's ms): the route's pending
-- set, and the set of buckets with orders not settled. ARGV: the tags (a loop over the
-- request only).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for k = 1, #KEYS do
  for i = 1, #ARGV do
    redis.call('ZADD', KEYS[k], now, ARGV[i])
  end
end
return #ARGV
