-- SECKILL.LIMIT: a sale's rate and burst changed on the fly; rate 0 removes the limit. The
-- bucket is first filled for the time gone at the old rate, then cut to the new burst.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- ARGV: rate, burst
-- Returns {"OK", state} or {"CLOSED", "not warmed"}.
local m = redis.call('HMGET', KEYS[1], 'version', 'state', 'rate', 'burst', 'tokens', 'ts')
if not m[1] then return {'CLOSED', 'not warmed'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local burst = tonumber(ARGV[2])
local old = tonumber(m[3] or '0') or 0
local tokens = burst
if old > 0 then
  tokens = tonumber(m[5] or '') or burst
  local ts = tonumber(m[6] or '') or now
  if now > ts then tokens = tokens + (now - ts) * old / 1000 end
  tokens = math.min(tokens, tonumber(m[4] or '0') or 0, burst)
end
redis.call('HSET', KEYS[1], 'rate', ARGV[1], 'burst', ARGV[2], 'tokens', tostring(tokens), 'ts', tostring(now))
return {'OK', m[2]}
