-- pool_fetch_reserve: reserve one provider call of a connector, all checks and the reservation
-- at once, fenced by the lead (generation and epoch): the back-off, the max_total ledger (used
-- plus pending plus this call within max_total; the call may ask for fewer than the estimate to
-- stay within it), max_in_flight (one permit per call in flight, across every worker) and
-- request_interval (a call starts no sooner than the last start plus the interval), on Redis's
-- own clock. A permit past its expiry (a worker that died mid-call) lapses here and counts its
-- reservation as used: an outcome never settled is counted at the estimate.
-- KEYS[1] the pool generation
-- KEYS[2] the connector's lead
-- KEYS[3] the connector's fetch state hash
-- KEYS[4] the connector's permits zset (member "permit id|count", score: its expiry, ms)
-- ARGV[1] the lead's value ("holder|generation|epoch")
-- ARGV[2] the lead's generation
-- ARGV[3] a fresh permit id
-- ARGV[4] proxies the call asks for at most (the estimate)
-- ARGV[5] request interval, milliseconds
-- ARGV[6] max in flight
-- ARGV[7] max total; -1 for none
-- ARGV[8] the permit's life, milliseconds (the call's timeout and a margin)
-- Reply: {"ok", permit member, count, now ms}; {"not_leader"}; {"backoff", wait ms};
--   {"ledger"}; {"in_flight", wait ms until the first permit lapses}; {"interval", wait ms}
if redis.call('GET', KEYS[1]) ~= ARGV[2] or redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'not_leader'}
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[3], 'used', 'pending', 'backoff_until', 'last_start')
local used = tonumber(state[1]) or 0
local pending = tonumber(state[2]) or 0
local backoffUntil = tonumber(state[3]) or 0
local lastStart = tonumber(state[4])

local lapsed = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
for _, member in ipairs(lapsed) do
  local count = tonumber(string.match(member, '|(%d+)$')) or 0
  redis.call('ZREM', KEYS[4], member)
  pending = math.max(0, pending - count)
  used = used + count
end
if #lapsed > 0 then
  redis.call('HSET', KEYS[3], 'used', used, 'pending', pending)
end

if backoffUntil > now then
  return {'backoff', backoffUntil - now}
end
local count = tonumber(ARGV[4])
local maxTotal = tonumber(ARGV[7])
if maxTotal >= 0 then
  local left = maxTotal - used - pending
  if left <= 0 then
    return {'ledger'}
  end
  if left < count then
    count = left
  end
end
if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[6]) then
  local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  return {'in_flight', math.max(1, tonumber(first[2]) - now)}
end
local interval = tonumber(ARGV[5])
if lastStart ~= nil and lastStart + interval > now then
  return {'interval', lastStart + interval - now}
end
local member = ARGV[3] .. '|' .. count
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[8]), member)
redis.call('HSET', KEYS[3], 'pending', pending + count, 'last_start', now)
return {'ok', member, count, now}
