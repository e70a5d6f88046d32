-- Moves an outbox entry that no one can read to the SKU's dead-letter stream, once: its
-- fields, the entry's id and why it could not be read. The sale's meta counts it (CHECK shows
-- the count).
-- KEYS: outbox, dead, meta
-- ARGV: entry id, error
-- Returns 1 if it moved the entry, 0 if the entry was gone already.
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #e == 0 then return 0 end
local fields = e[1][2]
fields[#fields + 1] = 'outbox_entry'
fields[#fields + 1] = ARGV[1]
fields[#fields + 1] = 'error'
fields[#fields + 1] = ARGV[2]
redis.call('XADD', KEYS[2], 'MAXLEN', '~', '10000', '*', unpack(fields))
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'dead', 1)
return 1
