-- A proxy's lease of tokens from a sale's rate: a token bucket of `rate` tokens a second, at
-- most `burst`, kept in the sale's meta as `tokens` (a fraction) at `ts` (Redis's clock, ms).
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- ARGV: tokens wanted, tokens given back (a lapsed lease's, never above the burst once added)
-- Returns {granted, rate, burst, retry ms}: retry is how long until the bucket holds what was
-- wanted, when it could not grant it all. A rate of 0: the sale has no rate (or no sale).
local m = redis.call('HMGET', KEYS[1], 'rate', 'burst', 'tokens', 'ts')
local rate = tonumber(m[1] or '0') or 0
if rate <= 0 then return {0, 0, 0, 0} end
local burst = tonumber(m[2] or '1') or 1
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens = tonumber(m[3] or '') or burst
local ts = tonumber(m[4] or '') or now
if now > ts then tokens = tokens + (now - ts) * rate / 1000 end
tokens = math.min(burst, tokens + tonumber(ARGV[2]))
local want = tonumber(ARGV[1])
local grant = math.max(0, math.min(want, math.floor(tokens)))
tokens = tokens - grant
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
local retry = 0
if grant < want then retry = math.ceil((want - grant - tokens) * 1000 / rate) end
return {grant, rate, burst, retry}
