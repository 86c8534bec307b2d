-- batch_append: appends one batch of a writer's entries to a work stream (a process's
-- observations, a gateway's preflight sightings), once per batch identity. A batch whose number
-- is not above the one recorded for its writer was applied before (sent again after a lost reply)
-- and appends nothing, so a writer may send a part again until it hears back without a duplicate
-- on the stream.
-- KEYS[1] the writer's applied record (applied:<writer>)
-- KEYS[2] the work stream (observations, sightings)
-- ARGV[1] batch number
-- ARGV[2] applied record's TTL, seconds (a writer sends a part again only while it lives)
-- ARGV[3] the stream's length cap (MAXLEN ~): it bounds a stream no worker takes
-- ARGV[4] the entry's field name
-- ARGV[5 ..] the entries' values, one JSON document each, oldest first
-- Reply: {1, trimmed} appended, trimmed counting the entries the cap removed from the stream;
-- {0, 0} applied before (nothing changed)
local batch = tonumber(ARGV[1])
local recorded = redis.call('GET', KEYS[1])
if recorded and tonumber(recorded) >= batch then
  return {0, 0}
end

local cap = ARGV[3]
local field = ARGV[4]
local before = redis.call('XLEN', KEYS[2])
local added = 0
for i = 5, #ARGV do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*', field, ARGV[i])
  added = added + 1
end
local after = redis.call('XLEN', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return {1, before + added - after}
