-- project_rate_lease: leases request tokens from a project's rate bucket, shared by every
-- gateway. The bucket refills at the project's rate up to its burst, by Redis's own clock
-- (TIME), so no two gateways' clocks are compared; a lease takes at most what the bucket holds,
-- so the tokens every gateway spends never exceed the rate times the time plus the burst.
-- KEYS[1] the project's bucket (rate:project:<id>): fields tokens, at_ms
-- ARGV[1] the rate, tokens a second
-- ARGV[2] the burst, the most the bucket holds
-- ARGV[3] the tokens asked for
-- Reply: {granted, wait_ms}: the tokens leased (0 to asked), and when the bucket is empty the
-- milliseconds until it holds one token again (0 otherwise).
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local asked = tonumber(ARGV[3])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at_ms')
local tokens = tonumber(stored[1])
local at = tonumber(stored[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
if now > at then
  tokens = math.min(burst, tokens + (now - at) * rate / 1000)
end

local granted = math.min(asked, math.floor(tokens))
if granted < 0 then
  granted = 0
end
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at_ms', now)
-- Long enough to refill whole; a bucket gone is a full one, as a new project's is.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 60000)

local waitMs = 0
if granted == 0 then
  waitMs = math.ceil((1 - tokens) / rate * 1000)
end
return { granted, waitMs }
