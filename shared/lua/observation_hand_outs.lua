-- observation_hand_outs: judges a batch's observations as hand-outs, oldest first, against each
-- proxy's last counted exit, and moves that record forward. A hand-out is a proxy seen on another
-- exit than the last one counted for it. The record is "<observed_at epoch ms> <ip>" and lives a
-- day from its last move. An observation newer than the record is a hand-out when its IP differs,
-- not when it is the same; one not newer (a late observation, or the same one delivered again)
-- is not, and leaves the record as it is. Each verdict is made and recorded in this one script,
-- so two batches on two workers count a transition once and a redelivered batch counts none.
-- Without a record (a new proxy, one idle for a day, a Redis wipe) the verdict is left to the
-- caller, and the record starts at that observation.
-- KEYS[1 ..] each observation's proxy record (proxy:last_exit:<proxy>), in ARGV's order (a key
-- repeats for each observation of its proxy)
-- ARGV[1] the record's TTL, seconds
-- ARGV[2 .. 1+2n] per observation, oldest first: observed_at (epoch ms), ip
-- Reply: one verdict per observation, in order: 1 a hand-out, 0 not, -1 no record (the caller
-- decides)
local ttl = ARGV[1]
local verdicts = {}
for i = 1, #KEYS do
  local at = tonumber(ARGV[2 * i])
  local ip = ARGV[2 * i + 1]
  local record = redis.call('GET', KEYS[i])
  local recordAt, recordIp
  if record then
    local atText, ipText = string.match(record, '^(%d+) (.+)$')
    recordAt, recordIp = tonumber(atText), ipText
  end
  if recordAt == nil then
    -- No record, or one no release of ours wrote: start it here.
    verdicts[i] = -1
    redis.call('SET', KEYS[i], ARGV[2 * i] .. ' ' .. ip, 'EX', ttl)
  elseif at > recordAt then
    verdicts[i] = (ip ~= recordIp) and 1 or 0
    redis.call('SET', KEYS[i], ARGV[2 * i] .. ' ' .. ip, 'EX', ttl)
  else
    verdicts[i] = 0
  end
end
return verdicts
