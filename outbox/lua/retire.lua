-- May a sale leave the set of sales the sweepers visit? Yes once it is over (closed, or past
-- its end by Redis's clock, or gone) and its outbox is empty: nothing is left to sweep.
-- KEYS: meta, outbox
-- Returns 1 or 0.
if redis.call('XLEN', KEYS[2]) > 0 then return 0 end
local m = redis.call('HMGET', KEYS[1], 'state', 'end')
if not m[1] or m[1] == 'closed' then return 1 end
local ends = tonumber(m[2] or '0')
if ends == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ends <= now then return 1 end
return 0
