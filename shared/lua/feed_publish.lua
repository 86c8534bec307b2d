-- feed_publish: the routing feed's one write, fenced by the controller lease. Writes the changed
-- sections, drops the removed ones (or every stored one, for a rewrite in full), writes the
-- manifest and the head, and appends the head's digest to the feed stream when it changed.
-- The head the publisher compared against must still be the stored one, so two publishes of one
-- process can never interleave a stale diff.
-- KEYS[1] the controller lease key
-- KEYS[2] the feed head
-- KEYS[3] the feed manifest
-- KEYS[4] the feed sections hash
-- KEYS[5] the feed stream
-- ARGV[1] holder id the lease must name
-- ARGV[2] the head as the publisher read it ('' when there was none)
-- ARGV[3] the new head (JSON)
-- ARGV[4] the new manifest (JSON)
-- ARGV[5] the new head's digest
-- ARGV[6] '1' when the head's digest changed (append a stream entry), '0' otherwise
-- ARGV[7] the feed stream's cap (XADD MAXLEN ~)
-- ARGV[8] '1' to rewrite in full (every stored section dropped first), '0' otherwise
-- ARGV[9] n, the number of section names to drop
-- ARGV[10 .. 9+n] section names to drop
-- ARGV[10+n ..] pairs of section name and sealed bytes to write
-- Reply: 1 written and a stream entry appended, 0 written with the head's digest unchanged, -1 not leader (the lease names another holder or none), -2 stale (the head moved since the publisher read it)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local current = redis.call('GET', KEYS[2])
if (current or '') ~= ARGV[2] then
  return -2
end
if ARGV[8] == '1' then
  redis.call('DEL', KEYS[4])
end
local drops = tonumber(ARGV[9])
for i = 10, 9 + drops do
  redis.call('HDEL', KEYS[4], ARGV[i])
end
for i = 10 + drops, #ARGV, 2 do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
end
redis.call('SET', KEYS[3], ARGV[4])
redis.call('SET', KEYS[2], ARGV[3])
if ARGV[6] == '1' then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'digest', ARGV[5])
  return 1
end
return 0
