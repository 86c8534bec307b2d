-- pool_maintain: one pass over a provider-API connector's pool. Removes entries past their hard
-- expiry (at most ARGV[3] a pass, oldest first, their ownership with them); drains available
-- and suspect entries past their usable-until (out of routed, stock and suspect, and out of the
-- checked index; the record stays until its expiry,
-- so the provider handing the proxy out again is still a duplicate); promotes stock to routed,
-- the longest-lived first, until the routed entries still usable reach the gateway reserve (all
-- of it without a reserve). Routed entries are never moved back to stock.
-- KEYS[1] the connector's entries hash
-- KEYS[2] the connector's checking zset
-- KEYS[3] the connector's routed zset
-- KEYS[4] the connector's stock zset
-- KEYS[5] the connector's extracted zset
-- KEYS[6] the connector's expiry zset
-- KEYS[7] the install's owners hash
-- KEYS[8] the connector's suspect zset
-- KEYS[9] the connector's checked zset
-- ARGV[1] now, epoch ms
-- ARGV[2] the gateway reserve; -1 when every available entry is routed
-- ARGV[3] the most entries removed in one pass
-- Reply: {expired, drained, promoted, checking, routed, stock, extracted, draining, more,
-- suspect}: the counts after the pass; more is 1 when expired entries remain for the next pass.
local now = tonumber(ARGV[1])
local reserve = tonumber(ARGV[2])
local bound = tonumber(ARGV[3])

local expired = 0
local gone = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, bound)
for _, id in ipairs(gone) do
  local raw = redis.call('HGET', KEYS[1], id)
  if raw ~= false then
    local entry = cjson.decode(raw)
    if redis.call('HGET', KEYS[7], entry.key) == entry.connector_id .. '/' .. id then
      redis.call('HDEL', KEYS[7], entry.key)
    end
  end
  redis.call('HDEL', KEYS[1], id)
  for k = 2, 6 do redis.call('ZREM', KEYS[k], id) end
  redis.call('ZREM', KEYS[8], id)
  redis.call('ZREM', KEYS[9], id)
  expired = expired + 1
end

local drained = 0
for _, k in ipairs({3, 4, 8}) do
  local past = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now)
  for _, id in ipairs(past) do
    redis.call('ZREM', KEYS[k], id)
    redis.call('ZREM', KEYS[9], id)
    local raw = redis.call('HGET', KEYS[1], id)
    if raw ~= false then
      local entry = cjson.decode(raw)
      entry.state = 'draining'
      redis.call('HSET', KEYS[1], id, cjson.encode(entry))
    end
    drained = drained + 1
  end
end

local promoted = 0
local want
if reserve < 0 then
  want = redis.call('ZCARD', KEYS[4])
else
  want = reserve - redis.call('ZCARD', KEYS[3])
end
if want > 0 then
  local popped = redis.call('ZPOPMAX', KEYS[4], want)
  for i = 1, #popped, 2 do
    local id, score = popped[i], popped[i + 1]
    local raw = redis.call('HGET', KEYS[1], id)
    if raw ~= false then
      local entry = cjson.decode(raw)
      entry.routed = true
      redis.call('HSET', KEYS[1], id, cjson.encode(entry))
      redis.call('ZADD', KEYS[3], score, id)
      promoted = promoted + 1
    end
  end
end

local checking = redis.call('ZCARD', KEYS[2])
local routed = redis.call('ZCARD', KEYS[3])
local stock = redis.call('ZCARD', KEYS[4])
local extracted = redis.call('ZCARD', KEYS[5])
local suspect = redis.call('ZCARD', KEYS[8])
local draining = redis.call('HLEN', KEYS[1]) - checking - routed - stock - extracted - suspect
if draining < 0 then draining = 0 end
local more = 0
if #gone == bound then more = 1 end
return {expired, drained, promoted, checking, routed, stock, extracted, draining, more, suspect}
