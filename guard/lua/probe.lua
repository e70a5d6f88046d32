-- What a proxy needs to know before it believes a sale event or flags a sale sold out.
-- KEYS: meta, stock, buyers, outbox, result, reserved, donated
-- Returns {state or "", version or "", stock, buyers, buckets or ""} (of one stock bucket, for
-- a split sale).
local m = redis.call('HMGET', KEYS[1], 'state', 'version', 'buckets')
return {m[1] or '', m[2] or '', tonumber(redis.call('GET', KEYS[2]) or '0'), redis.call('HLEN', KEYS[3]), m[3] or ''}
