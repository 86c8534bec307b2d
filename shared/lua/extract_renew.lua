-- extract_renew: moves an open extraction lease's end. A lease whose end has passed is not
-- renewed: its proxies are on their way back to the pool (the next sweep returns them).
-- KEYS[1] the lease's hash
-- KEYS[2] the open leases zset
-- ARGV[1] now, epoch ms
-- ARGV[2] the lease's id
-- ARGV[3] the project the caller acts for
-- ARGV[4] the new end, epoch ms
-- Reply: 1 renewed; 0 no such lease; -1 another project's; -2 ended.
local now = tonumber(ARGV[1])
local fields = redis.call('HMGET', KEYS[1], 'project', 'end')
if not fields[1] then return 0 end
if fields[1] ~= ARGV[3] then return -1 end
if tonumber(fields[2]) <= now then return -2 end
redis.call('HSET', KEYS[1], 'end', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
return 1
