-- Who does a piece of background work for the whole cluster: a lease that its holder renews.
-- KEYS[1]: the lease; ARGV[1]: the caller's instance; ARGV[2]: the lease's time (ms).
-- Returns 1 when the caller holds the lease now (taken, or renewed), 0 when another does.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
