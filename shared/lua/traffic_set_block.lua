-- traffic_set_block: writes one traffic decision. First the subject's pending mark is deleted if
-- it still holds the value the decision read (a request made after the decision's reads began
-- holds a newer mark and waits for its own decision), whether or not the decision changes. Then
-- the stored block is compared with the decision: only when they differ is the subject's field of
-- the blocks hash set or deleted and a runtime entry appended for the feed builder, so the hash
-- and the stream change only when a decision does and a repeated ask writes nothing.
-- KEYS[1] the pending hash (traffic:pending)
-- KEYS[2] the blocks hash (traffic:blocked)
-- KEYS[3] the runtime stream
-- ARGV[1] the subject (a connector id, or project:<id>)
-- ARGV[2] the pending mark the decision read, '' for none
-- ARGV[3] the decision: '' not blocked, else the block's value ({"until_ms": …})
-- ARGV[4] the runtime stream's length cap (MAXLEN ~)
-- Reply: {changed, cleared}: 1 when the blocks hash changed (and an entry was appended), 1 when
-- the pending mark was deleted.
local subject = ARGV[1]
local mark = ARGV[2]
local decision = ARGV[3]

local cleared = 0
if mark ~= '' and redis.call('HGET', KEYS[1], subject) == mark then
  redis.call('HDEL', KEYS[1], subject)
  cleared = 1
end

local stored = redis.call('HGET', KEYS[2], subject)
if stored == false then
  stored = ''
end
if stored == decision then
  return { 0, cleared }
end
if decision == '' then
  redis.call('HDEL', KEYS[2], subject)
else
  redis.call('HSET', KEYS[2], subject, decision)
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'kind', 'traffic', 'ref', subject)
return { 1, cleared }
