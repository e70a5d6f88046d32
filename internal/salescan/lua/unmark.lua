-- Takes stock buckets found with nothing to do out of a set of marked buckets (the pending
-- set, the unsettled set), unless a proxy marked one again within the quiet time: it is
-- selling there, and will write again.
-- KEYS[1]: the set; ARGV[1]: the quiet time (ms); ARGV[2..]: the tags.
-- Returns how many left the set.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local quiet = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local at = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if at and tonumber(at) <= now - quiet then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
