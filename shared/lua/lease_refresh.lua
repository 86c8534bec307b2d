-- lease_refresh: extend a lease only while it still holds this holder's id.
-- KEYS[1] the lease key
-- ARGV[1] holder id
-- ARGV[2] time to live, milliseconds
-- Reply: 1 extended, 0 the key is gone, -1 another holder has it
local current = redis.call('GET', KEYS[1])
if current == false then
  return 0
end
if current ~= ARGV[1] then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
