-- lease_release: give a lease up, only while it holds this holder's id.
-- KEYS[1] the lease key
-- ARGV[1] holder id
-- Reply: 1 released, 0 not ours (gone or another holder's)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
