-- SECKILL.BUY for the buys of many SKUs (or stock buckets) whose keys are all on this master,
-- in one call: each SKU's buys run as buy.lua would run them alone, one SKU after the other.
-- The script that runs is "#!lua flags=allow-cross-slot-keys", then buy.lua's text, then this.
-- The keys are not declared (they span slots): each SKU's are named here as package sale names
-- them, <prefix><tag>}:<part>, and checked first with one EXISTS of all seven, which Redis
-- refuses when their slot is not served here or is moving with a key gone (MOVED, ASK,
-- TRYAGAIN, or a cluster that is down, would have refused the call of that SKU alone).
-- ARGV[1]: the prefix ("seckill:{"); ARGV[2]: the proxy's route; then for each SKU: its tag,
-- the version the proxy expects, donors, the count n of its buys, and n times uid, qty, order
-- id, proxy instance (buy.lua's ARGV, without the route).
-- Returns one value per SKU: buy.lua's reply for its buys; the error "NOTHERE <Redis's
-- error>" when its keys are not all here (nothing of that SKU was read or written, and the
-- proxy sends its buys again as a call of their own); or the error that stopped its buys (a
-- key of the wrong type...), as buy.lua alone would have failed, without stopping the others.
local names = {'meta', 'stock', 'buyers', 'outbox', 'result', 'reserved', 'donated'}
local function here(keys)
  redis.call('EXISTS', unpack(keys))
end
local function failed(prefix, err)
  return {err = prefix .. (type(err) == 'table' and err.err or tostring(err))}
end
-- The layout is checked whole before any SKU runs: a malformed call writes nothing.
local starts = {}
local i = 3
while i <= #ARGV do
  local n = tonumber(ARGV[i + 3])
  if not n or n < 1 or n ~= math.floor(n) or i + 3 + 4 * n > #ARGV then
    return redis.error_reply('ERR buymany.lua takes a prefix, a route, then per SKU: tag, version, donors, count, and uid, qty, order id, instance per buy')
  end
  starts[#starts + 1] = i
  i = i + 4 + 4 * n
end
local out = {}
for s, i in ipairs(starts) do
  local n = tonumber(ARGV[i + 3])
  local base = ARGV[1] .. ARGV[i] .. '}:'
  local keys = {}
  for k = 1, #names do keys[k] = base .. names[k] end
  local ok, err = pcall(here, keys)
  if ok then
    local argv = {ARGV[i + 1], ARGV[2], ARGV[i + 2]}
    for j = 1, 4 * n do argv[3 + j] = ARGV[i + 3 + j] end
    local done, r = pcall(buy, keys, argv)
    out[s] = done and r or failed('', r)
  else
    out[s] = failed('NOTHERE ', err)
  end
end
return out
