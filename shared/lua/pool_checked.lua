-- pool_checked: applies check results to a provider-API connector's pool.
-- A checking entry that passed becomes available: routed while the routed entries still usable
-- number fewer than the gateway reserve (or always, without a reserve), else extraction stock;
-- one already past its usable-until drains instead. A checking entry that failed leaves the pool
-- (a new proxy must pass its first check).
-- An available entry (routed or stock) that passed keeps its place with a new check time; one
-- that failed counts a failure: it becomes suspect (out of routed and stock: no new request, no
-- extraction) or, at ARGV[3] failures in a row, leaves the pool.
-- A suspect entry that passed goes back where it was (routed, else stock) with its failures
-- cleared, or drains when past its usable-until; one that failed counts a failure as above.
-- Leaving the pool gives up its ownership. Entries in no state a result applies to (extracted,
-- drained, gone meanwhile) are skipped: the check is stale.
-- KEYS[1] the connector's entries hash
-- KEYS[2] the connector's checking zset
-- KEYS[3] the connector's routed zset (score: usable until, ms)
-- KEYS[4] the connector's stock zset (score: usable until, ms)
-- KEYS[5] the connector's expiry zset
-- KEYS[6] the install's owners hash
-- KEYS[7] the connector's suspect zset (score: usable until, ms)
-- KEYS[8] the connector's checked zset (score: last passed check, ms)
-- ARGV[1] now, epoch ms
-- ARGV[2] the gateway reserve (pool.reserve_for_gateway); -1 when every available entry is routed
-- ARGV[3] failures in a row that remove an available entry (pool.remove_after_failures)
-- ARGV[4 ..] per result, two values: entry id, 1 passed or 0 failed
-- Reply: {routed, stocked, rechecked, drained, removed, skipped, suspected, restored,
-- restored_routed}: restored counts the suspects that passed, restored_routed those of them back
-- in the feed
local now = tonumber(ARGV[1])
local reserve = tonumber(ARGV[2])
local threshold = tonumber(ARGV[3])
local routed, stocked, rechecked, drained, removed, skipped = 0, 0, 0, 0, 0, 0
local suspected, restored, restored_routed = 0, 0, 0

local function remove(id, entry)
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[5], id)
  redis.call('ZREM', KEYS[7], id)
  redis.call('ZREM', KEYS[8], id)
  if redis.call('HGET', KEYS[6], entry.key) == entry.connector_id .. '/' .. id then
    redis.call('HDEL', KEYS[6], entry.key)
  end
end

-- A failure of an available or suspect entry: suspect, or gone at the threshold.
local function failed(id, entry)
  local failures = (tonumber(entry.failures) or 0) + 1
  if failures >= threshold then
    remove(id, entry)
    removed = removed + 1
    return
  end
  if entry.state ~= 'suspect' then suspected = suspected + 1 end
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[8], id)
  redis.call('ZADD', KEYS[7], entry.usable_until, id)
  entry.state = 'suspect'
  entry.failures = failures
  redis.call('HSET', KEYS[1], id, cjson.encode(entry))
end

for i = 4, #ARGV, 2 do
  local id, passed = ARGV[i], ARGV[i + 1] == '1'
  local raw = redis.call('HGET', KEYS[1], id)
  local entry = raw ~= false and cjson.decode(raw) or nil
  local state = entry and entry.state
  if entry == nil or (state ~= 'checking' and state ~= 'available' and state ~= 'suspect') or
    (state == 'checking' and redis.call('ZSCORE', KEYS[2], id) == false) then
    skipped = skipped + 1
  elseif state == 'checking' then
    if not passed then
      remove(id, entry)
      removed = removed + 1
    else
      redis.call('ZREM', KEYS[2], id)
      entry.checked_at = now
      entry.failures = 0
      if entry.usable_until <= now then
        entry.state = 'draining'
        drained = drained + 1
      elseif reserve < 0 or redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') < reserve then
        entry.state = 'available'
        entry.routed = true
        redis.call('ZADD', KEYS[3], entry.usable_until, id)
        redis.call('ZADD', KEYS[8], now, id)
        routed = routed + 1
      else
        entry.state = 'available'
        entry.routed = false
        redis.call('ZADD', KEYS[4], entry.usable_until, id)
        redis.call('ZADD', KEYS[8], now, id)
        stocked = stocked + 1
      end
      redis.call('HSET', KEYS[1], id, cjson.encode(entry))
    end
  elseif not passed then
    failed(id, entry)
  elseif state == 'available' then
    entry.checked_at = now
    entry.failures = 0
    redis.call('ZADD', KEYS[8], now, id)
    redis.call('HSET', KEYS[1], id, cjson.encode(entry))
    rechecked = rechecked + 1
  else
    -- A suspect that passed.
    redis.call('ZREM', KEYS[7], id)
    entry.checked_at = now
    entry.failures = 0
    if entry.usable_until <= now then
      entry.state = 'draining'
      drained = drained + 1
    else
      entry.state = 'available'
      redis.call('ZADD', KEYS[entry.routed and 3 or 4], entry.usable_until, id)
      redis.call('ZADD', KEYS[8], now, id)
      restored = restored + 1
      if entry.routed then restored_routed = restored_routed + 1 end
    end
    redis.call('HSET', KEYS[1], id, cjson.encode(entry))
  end
end
return {routed, stocked, rechecked, drained, removed, skipped, suspected, restored, restored_routed}
