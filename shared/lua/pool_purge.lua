-- pool_purge: empties a connector's pool, for a connector that is gone or no longer a
-- provider-API one: its entries' ownership is given up (only where it is still theirs) and
-- every key of its pool is deleted, its fetch bookkeeping too.
-- KEYS[1] the connector's entries hash
-- KEYS[2] the install's owners hash
-- KEYS[3 ..] the connector's other pool keys (state sets, fetch state, last-known settings),
--   deleted
-- ARGV[1] the connector id
-- Reply: the number of entries the pool held
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local id, entry = entries[i], cjson.decode(entries[i + 1])
  if redis.call('HGET', KEYS[2], entry.key) == ARGV[1] .. '/' .. id then
    redis.call('HDEL', KEYS[2], entry.key)
  end
end
redis.call('DEL', KEYS[1])
for k = 3, #KEYS do redis.call('DEL', KEYS[k]) end
return #entries / 2
