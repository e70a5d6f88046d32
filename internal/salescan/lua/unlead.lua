-- Gives up a lease of Lead's, if the caller holds it: a proxy that stops hands the work on
-- at once rather than after the lease's time.
-- KEYS[1]: the lease; ARGV[1]: the caller's instance. Returns 1 if it held it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
