-- fake_ip_assign: the fake address of a name, shared by every gateway's tunnel resolver. A name
-- already mapped keeps its offset and is marked used now; a new name takes the next offset never
-- handed out, and once the block is full, the offset of the least recently used name, which
-- loses it. Mapping both ways and the recency move together, so a lookup by address never finds
-- a name that no longer holds it. The keys expire after ARGV[5] ms without a query, so a block
-- no gateway answers from any more leaves nothing behind.
-- KEYS[1] name to offset, a hash (tunnel:fakeip:<block>:names)
-- KEYS[2] offset to name, a hash (tunnel:fakeip:<block>:offsets)
-- KEYS[3] names by last use, a sorted set scored by epoch ms (tunnel:fakeip:<block>:recency)
-- KEYS[4] the next offset never handed out, a counter (tunnel:fakeip:<block>:next)
-- ARGV[1] the name
-- ARGV[2] now, epoch ms
-- ARGV[3] the block's first offset
-- ARGV[4] the block's last offset
-- ARGV[5] the keys' lifetime without an assignment, ms
-- Reply: the name's offset in the block
local name = ARGV[1]
local now = ARGV[2]
local first = tonumber(ARGV[3])
local last = tonumber(ARGV[4])
local ttl = ARGV[5]

local held = redis.call('HGET', KEYS[1], name)
if held then
  redis.call('ZADD', KEYS[3], now, name)
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
  return tonumber(held)
end

local offset
local n = redis.call('INCR', KEYS[4])
if first + n - 1 <= last then
  offset = first + n - 1
else
  -- The block is full: the least recently used name gives its offset up.
  local oldest = redis.call('ZPOPMIN', KEYS[3])
  if oldest[1] then
    offset = tonumber(redis.call('HGET', KEYS[1], oldest[1]))
    redis.call('HDEL', KEYS[1], oldest[1])
  end
  if offset then
    redis.call('SET', KEYS[4], last - first + 1)
  else
    -- Part of the mapping was lost (an eviction of one key): the block starts over.
    redis.call('SET', KEYS[4], 1)
    offset = first
  end
end
-- Whoever held the offset last gives it up, so both directions always agree.
local previous = redis.call('HGET', KEYS[2], offset)
if previous and previous ~= name then
  redis.call('HDEL', KEYS[1], previous)
  redis.call('ZREM', KEYS[3], previous)
end

redis.call('HSET', KEYS[1], name, offset)
redis.call('HSET', KEYS[2], offset, name)
redis.call('ZADD', KEYS[3], now, name)
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
return offset
