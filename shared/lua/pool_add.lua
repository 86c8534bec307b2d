-- pool_add: adds a fetch's fresh proxies to a provider-API connector's pool as checking entries.
-- The first source keeps a proxy (seed 001 section 5): a proxy whose key digest the project's
-- owners hash already holds, for this connector or another, is only counted, and its owner's
-- entry (its expiry included) is left alone. New proxies past the pool's live size cap are only
-- counted. Proxies already past their expiry are skipped. The entries come as one JSON argument
-- and every write is batched (a thousand fields a command), so a 10,000-proxy answer costs a few
-- dozen commands rather than fifty thousand.
-- KEYS[1] the connector's entries hash
-- KEYS[2] the connector's checking zset (score: fetched at, ms)
-- KEYS[3] the connector's expiry zset (score: expires at, ms)
-- KEYS[4] the install's owners hash (key digest -> "<connector>/<entry id>")
-- KEYS[5] the connector's routed zset
-- KEYS[6] the connector's stock zset
-- KEYS[7] the connector's suspect zset
-- ARGV[1] now, epoch ms
-- ARGV[2] the live size cap (pool.max_size: checking, routed, stock and suspect entries)
-- ARGV[3] the connector id
-- ARGV[4] a JSON array of [entry id, key digest, expires at (ms, as text), the entry's JSON record]
-- Reply: {added, duplicates, over_max, id of each entry added ...}
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local connector = ARGV[3]
local items = cjson.decode(ARGV[4])
local CHUNK = 1000

local live = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[5]) + redis.call('ZCARD', KEYS[6]) +
  redis.call('ZCARD', KEYS[7])

-- Which keys are owned already, read a chunk at a time.
local owned = {}
for start = 1, #items, CHUNK do
  local last = math.min(start + CHUNK - 1, #items)
  local fields = {}
  for i = start, last do fields[#fields + 1] = items[i][2] end
  local got = redis.call('HMGET', KEYS[4], unpack(fields))
  for j = 1, #got do owned[start + j - 1] = got[j] end
end

local added, duplicates, over = 0, 0, 0
local ids, owners, entries, checking, expiry = {}, {}, {}, {}, {}
local taken = {}
for i = 1, #items do
  local id, key, expires, record = items[i][1], items[i][2], items[i][3], items[i][4]
  if tonumber(expires) > now then
    if owned[i] ~= false or taken[key] then
      duplicates = duplicates + 1
    elseif live >= cap then
      over = over + 1
    else
      taken[key] = true
      owners[#owners + 1] = key
      owners[#owners + 1] = connector .. '/' .. id
      entries[#entries + 1] = id
      entries[#entries + 1] = record
      checking[#checking + 1] = now
      checking[#checking + 1] = id
      expiry[#expiry + 1] = expires
      expiry[#expiry + 1] = id
      live = live + 1
      added = added + 1
      ids[#ids + 1] = id
    end
  end
end

-- Writes in chunks of a thousand pairs: unpack has a bound, and a command stays small.
local function write(command, key, pairs)
  for start = 1, #pairs, 2 * CHUNK do
    local last = math.min(start + 2 * CHUNK - 1, #pairs)
    redis.call(command, key, unpack(pairs, start, last))
  end
end
write('HSET', KEYS[4], owners)
write('HSET', KEYS[1], entries)
write('ZADD', KEYS[2], checking)
write('ZADD', KEYS[3], expiry)

local reply = {added, duplicates, over}
for _, id in ipairs(ids) do reply[#reply + 1] = id end
return reply
