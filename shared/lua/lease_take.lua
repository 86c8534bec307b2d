-- lease_take: take a lease when it is free or still held by this holder.
-- A holder never waits out its own key: a take that finds its own id renews it.
-- KEYS[1] the lease key
-- ARGV[1] holder id (fresh for each process life)
-- ARGV[2] time to live, milliseconds
-- Reply: 1 taken or renewed, 0 held by another holder
local current = redis.call('GET', KEYS[1])
if current == false or current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
