-- Moves a sale from one state to another, only if its version is still the given one.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- ARGV: version, from state, to state
-- Returns 1 if it moved, 0 if the version or state had changed.
local m = redis.call('HMGET', KEYS[1], 'version', 'state')
if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[3])
return 1
