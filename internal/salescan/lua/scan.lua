#!lua flags=no-writes,allow-cross-slot-keys
-- What the background work needs to know of many sales' buckets, in one call on one master.
-- The keys are not declared: every tag's keys must be on this node (the caller groups the
-- tags by master), and are named here as package sale names them: <prefix><tag>}:<part>.
-- ARGV[1]: the prefix ("seckill:{"); ARGV[2]: what to read, "sweep" (the outbox, and the
-- reservations of a split sale's buckets) or "late" (the buyers and results counted);
-- ARGV[3..]: the tags (a loop over the request only).
-- Returns 9 values per tag: the outbox's length, its oldest entry's ms (0: none), the meta's
-- state ("": no meta), end, route and buckets, and the buyers, results and reservations
-- counted (0 where not read). A tag whose keys cannot be read (a key of the wrong type, a
-- slot moved away) has "!" and the error as its state, and zeros: the other tags are read all
-- the same.
local sweep = ARGV[2] == 'sweep'
local function read(tag)
  local base = ARGV[1] .. tag .. '}:'
  local m = redis.call('HMGET', base .. 'meta', 'state', 'end', 'route', 'buckets')
  local len, oldest, buyers, results, reserved = 0, 0, 0, 0, 0
  if sweep then
    local outbox = base .. 'outbox'
    len = redis.call('XLEN', outbox)
    if len > 0 then
      local first = redis.call('XRANGE', outbox, '-', '+', 'COUNT', 1)[1]
      if first then oldest = tonumber(string.match(first[1], '^(%d+)')) or 0 end
    end
    if string.find(tag, '#', 1, true) or string.find(m[4] or '', ',', 1, true) then
      reserved = redis.call('ZCARD', base .. 'reserved')
    end
  else
    buyers = redis.call('HLEN', base .. 'buyers')
    results = redis.call('HLEN', base .. 'result')
  end
  return {len, oldest, m[1] or '', m[2] or '', m[3] or '', m[4] or '', buyers, results, reserved}
end
local out = {}
local n = 0
for i = 3, #ARGV do
  local ok, r = pcall(read, ARGV[i])
  if not ok then
    local msg = type(r) == 'table' and r.err or tostring(r)
    r = {0, 0, '!' .. msg, '', '', '', 0, 0, 0}
  end
  for j = 1, 9 do out[n + j] = r[j] end
  n = n + 9
end
return out
