-- pool_add: adds a fetch's fresh proxies to a provider-API connector's pool as checking entries.
-- The first source keeps a proxy (seed 001 section 5): a proxy whose key digest the project's
-- owners hash already holds, for this connector or another, is only counted, and its owner's
-- entry (its expiry included) is left alone. New proxies past the pool's live size cap are only
-- counted. Proxies already past their expiry are skipped.
-- KEYS[1] the connector's entries hash
-- KEYS[2] the connector's checking zset (score: fetched at, ms)
-- KEYS[3] the connector's expiry zset (score: expires at, ms)
-- KEYS[4] the project's owners hash (key digest -> "<connector>/<entry id>")
-- KEYS[5] the connector's routed zset
-- KEYS[6] the connector's stock zset
-- ARGV[1] now, epoch ms
-- ARGV[2] the live size cap (pool.max_size: checking, routed and stock entries)
-- ARGV[3] the connector id
-- ARGV[4 ..] per proxy, four values: entry id, key digest, expires at (ms), the entry's JSON record
-- Reply: {added, duplicates, over_max, id of each entry added ...}
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local connector = ARGV[3]
local live = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[5]) + redis.call('ZCARD', KEYS[6])
local added, duplicates, over = 0, 0, 0
local ids = {}
for i = 4, #ARGV, 4 do
  local id, key, expires, record = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  if expires > now then
    if redis.call('HEXISTS', KEYS[4], key) == 1 then
      duplicates = duplicates + 1
    elseif live >= cap then
      over = over + 1
    else
      redis.call('HSET', KEYS[4], key, connector .. '/' .. id)
      redis.call('HSET', KEYS[1], id, record)
      redis.call('ZADD', KEYS[2], now, id)
      redis.call('ZADD', KEYS[3], expires, id)
      live = live + 1
      added = added + 1
      ids[#ids + 1] = id
    end
  end
end
local reply = {added, duplicates, over}
for _, id in ipairs(ids) do reply[#reply + 1] = id end
return reply
