-- pool_fetch_stats: a connector's fetch bookkeeping as of now, read at once: its counts of the
-- current generation (zeros when the state is another generation's or there is none yet) and
-- the calls in flight (permits not yet lapsed).
-- KEYS[1] the pool generation
-- KEYS[2] the connector's fetch state hash
-- KEYS[3] the connector's permits zset
-- Reply: {generation or "", success, empty, duplicate_only, error, rate_limited, empty_streak,
--   error_streak, backoff_until, used, pending, in flight}
local generation = redis.call('GET', KEYS[1])
if generation == false then
  return {'', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
if redis.call('HGET', KEYS[2], 'generation') ~= generation then
  return {generation, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
local state = redis.call('HMGET', KEYS[2], 'success', 'empty', 'duplicate_only', 'error',
  'rate_limited', 'empty_streak', 'error_streak', 'backoff_until', 'used', 'pending')
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local reply = {generation}
for i = 1, #state do
  reply[#reply + 1] = tonumber(state[i]) or 0
end
reply[#reply + 1] = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
return reply
