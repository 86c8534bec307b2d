-- pool_fetch_settle: settle a provider call's permit and record its fetch's classification
-- (seed 001 section 8.1), at once. The ledger takes the call's reservation off pending and
-- counts what the call came to (the proxies of its answer; the estimate when the outcome is not
-- known). A permit settles once: a second settle, or one of a permit that lapsed (already
-- counted at its estimate), changes nothing. Not fenced by the lead: a call reserved under a
-- lead since lost still settles; fenced by the generation, since another generation's ledger is
-- not this call's. A fetch without a permit (its call was never made) records its kind only.
-- Kinds: success and duplicate_only reset the empty streak; empty adds to it; error leaves it,
-- adds to the error streak and backs off (from the base, doubling per error in a row, up to the
-- cap; a provider's Retry-After when longer); any other kind ends the back-off.
-- KEYS[1] the pool generation
-- KEYS[2] the connector's fetch state hash
-- KEYS[3] the connector's permits zset
-- ARGV[1] the generation the permit was reserved in
-- ARGV[2] the permit member; "" for none
-- ARGV[3] proxies the ledger counts for the call
-- ARGV[4] the kind: success, empty, duplicate_only, error; "" to record none (a cancelled call)
-- ARGV[5] 1 when the provider answered 429, else 0
-- ARGV[6] the provider's Retry-After, milliseconds; 0 for none
-- ARGV[7] back-off base, milliseconds
-- ARGV[8] back-off cap, milliseconds
-- ARGV[9] empty fetches in a row that mark the connector depleted
-- Reply: {settled, empty streak, error streak, back-off until (ms, 0 none), depleted (1 or 0)}
--   settled: 1 now, 0 nothing to settle (settled before, lapsed, or no permit), -1 another
--   generation (nothing changed)
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('HGET', KEYS[2], 'generation') ~= ARGV[1] then
  return {-1, 0, 0, 0, 0}
end
local function field(name)
  return tonumber(redis.call('HGET', KEYS[2], name)) or 0
end
local threshold = tonumber(ARGV[9])
local settled = 0
if ARGV[2] ~= '' then
  if redis.call('ZREM', KEYS[3], ARGV[2]) == 0 then
    local streak = field('empty_streak')
    return {0, streak, field('error_streak'), field('backoff_until'), streak >= threshold and 1 or 0}
  end
  local count = tonumber(string.match(ARGV[2], '|(%d+)$')) or 0
  redis.call('HSET', KEYS[2], 'pending', math.max(0, field('pending') - count))
  redis.call('HINCRBY', KEYS[2], 'used', tonumber(ARGV[3]))
  settled = 1
end
local kind = ARGV[4]
if kind == 'error' then
  redis.call('HINCRBY', KEYS[2], 'error', 1)
  if ARGV[5] == '1' then
    redis.call('HINCRBY', KEYS[2], 'rate_limited', 1)
  end
  local errors = redis.call('HINCRBY', KEYS[2], 'error_streak', 1)
  local delay = math.min(tonumber(ARGV[7]) * 2 ^ math.min(errors - 1, 30), tonumber(ARGV[8]))
  delay = math.max(delay, tonumber(ARGV[6]))
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('HSET', KEYS[2], 'backoff_until', now + delay)
elseif kind ~= '' then
  redis.call('HINCRBY', KEYS[2], kind, 1)
  if kind == 'empty' then
    redis.call('HINCRBY', KEYS[2], 'empty_streak', 1)
  else
    redis.call('HSET', KEYS[2], 'empty_streak', 0)
  end
  redis.call('HSET', KEYS[2], 'error_streak', 0, 'backoff_until', 0)
end
local streak = field('empty_streak')
return {settled, streak, field('error_streak'), field('backoff_until'), streak >= threshold and 1 or 0}
