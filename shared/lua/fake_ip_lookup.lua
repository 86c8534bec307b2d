-- fake_ip_lookup: the name a fake address stands for, for a tunnel connection to it, marked used
-- now so the block does not hand its address to another name while connections reach it.
-- KEYS[1] offset to name, a hash (tunnel:fakeip:<block>:offsets)
-- KEYS[2] names by last use, a sorted set scored by epoch ms (tunnel:fakeip:<block>:recency)
-- ARGV[1] the offset
-- ARGV[2] now, epoch ms
-- Reply: the name, or nil when no name holds the offset
local name = redis.call('HGET', KEYS[1], ARGV[1])
if not name then return nil end
redis.call('ZADD', KEYS[2], 'XX', ARGV[2], name)
return name
