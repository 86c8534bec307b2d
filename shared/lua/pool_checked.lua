-- pool_checked: applies check results to a provider-API connector's pool. A checking entry that
-- passed becomes available: routed while the routed entries still usable number fewer than the
-- gateway reserve (or always, without a reserve), else extraction stock; one already past its
-- usable-until drains instead. A stock entry that passed a re-check keeps its place with a new
-- check time. An entry that failed leaves the pool, its ownership with it. Entries in no state
-- the result applies to (extracted, drained, gone meanwhile) are skipped: the check is stale.
-- KEYS[1] the connector's entries hash
-- KEYS[2] the connector's checking zset
-- KEYS[3] the connector's routed zset (score: usable until, ms)
-- KEYS[4] the connector's stock zset (score: usable until, ms)
-- KEYS[5] the connector's expiry zset
-- KEYS[6] the install's owners hash
-- ARGV[1] now, epoch ms
-- ARGV[2] the gateway reserve (pool.reserve_for_gateway); -1 when every available entry is routed
-- ARGV[3 ..] per result, two values: entry id, 1 passed or 0 failed
-- Reply: {routed, stocked, rechecked, drained, removed, skipped}
local now = tonumber(ARGV[1])
local reserve = tonumber(ARGV[2])
local routed, stocked, rechecked, drained, removed, skipped = 0, 0, 0, 0, 0, 0

local function remove(id, entry)
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[5], id)
  if redis.call('HGET', KEYS[6], entry.key) == entry.connector_id .. '/' .. id then
    redis.call('HDEL', KEYS[6], entry.key)
  end
end

for i = 3, #ARGV, 2 do
  local id, passed = ARGV[i], ARGV[i + 1] == '1'
  local raw = redis.call('HGET', KEYS[1], id)
  local checking = redis.call('ZSCORE', KEYS[2], id)
  local stock = redis.call('ZSCORE', KEYS[4], id)
  if raw == false or (checking == false and stock == false) then
    skipped = skipped + 1
  else
    local entry = cjson.decode(raw)
    if not passed then
      remove(id, entry)
      removed = removed + 1
    elseif stock ~= false then
      entry.checked_at = now
      redis.call('HSET', KEYS[1], id, cjson.encode(entry))
      rechecked = rechecked + 1
    else
      redis.call('ZREM', KEYS[2], id)
      entry.checked_at = now
      if entry.usable_until <= now then
        entry.state = 'draining'
        drained = drained + 1
      elseif reserve < 0 or redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') < reserve then
        entry.state = 'available'
        entry.routed = true
        redis.call('ZADD', KEYS[3], entry.usable_until, id)
        routed = routed + 1
      else
        entry.state = 'available'
        entry.routed = false
        redis.call('ZADD', KEYS[4], entry.usable_until, id)
        stocked = stocked + 1
      end
      redis.call('HSET', KEYS[1], id, cjson.encode(entry))
    end
  end
end
return {routed, stocked, rechecked, drained, removed, skipped}
