-- pool_evidence: takes the gateways' connect failures through a provider-API connector's
-- proxies (counts by entry id, written by the gateways since the last take) and empties them.
-- Each available entry named (routed or stock) becomes suspect: out of the feed and of
-- extraction until a check passes. The failures count as one failure of the entry, never
-- reaching ARGV[1] by themselves: only a failed check removes an entry, so gateways that cannot
-- reach a proxy for their own reasons never empty a pool. Entries in any other state (checking,
-- suspect already, extracted, draining, gone) are left alone.
-- KEYS[1] the connector's entries hash
-- KEYS[2] the connector's evidence hash (entry id -> failures)
-- KEYS[3] the connector's routed zset
-- KEYS[4] the connector's stock zset
-- KEYS[5] the connector's suspect zset (score: usable until, ms)
-- KEYS[6] the connector's checked zset
-- ARGV[1] failures in a row that remove an available entry (pool.remove_after_failures)
-- Reply: {suspected, suspected_routed, named}: entries made suspect, those of them the feed
-- carried, and the entry ids the evidence named
local threshold = tonumber(ARGV[1])
local named = redis.call('HKEYS', KEYS[2])
redis.call('DEL', KEYS[2])
local suspected, suspected_routed = 0, 0
for _, id in ipairs(named) do
  local raw = redis.call('HGET', KEYS[1], id)
  if raw ~= false then
    local entry = cjson.decode(raw)
    if entry.state == 'available' then
      redis.call('ZREM', KEYS[3], id)
      redis.call('ZREM', KEYS[4], id)
      redis.call('ZREM', KEYS[6], id)
      redis.call('ZADD', KEYS[5], entry.usable_until, id)
      entry.state = 'suspect'
      entry.failures = math.min((tonumber(entry.failures) or 0) + 1, threshold - 1)
      redis.call('HSET', KEYS[1], id, cjson.encode(entry))
      suspected = suspected + 1
      if entry.routed then suspected_routed = suspected_routed + 1 end
    end
  end
end
return {suspected, suspected_routed, #named}
