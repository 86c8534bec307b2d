-- rate_window: counts a proxy's completed requests in its sliding rate-limit window, shared by
-- every gateway, and trips the proxy into quarantine when the window is full. The eviction, the
-- count, the additions and the trip run as one script, so two gateways counting the same proxy
-- never both see room for one more, and a trip's three writes (the window starts over, the
-- quarantine, the runtime entry the controller follows) are one transaction: the controller never
-- reads the entry without the quarantine.
-- KEYS[1] the proxy's window, a sorted set of request members scored by epoch ms (proxy:requests:<id>)
-- KEYS[2] the quarantined proxies, a sorted set scored by the epoch ms each rests until
-- KEYS[3] the runtime stream
-- ARGV[1] now, epoch ms
-- ARGV[2] the window's length, ms
-- ARGV[3] max_requests: the window is full at this many requests
-- ARGV[4] n, the requests to count (a gateway sends a proxy's requests of one turn together)
-- ARGV[5] a member prefix unique to this call (writer and call number); members are prefix:i
-- ARGV[6] the epoch ms a quarantine tripped now rests until
-- ARGV[7] the proxy id (the quarantine's member and the runtime entry's ref)
-- ARGV[8] the runtime stream's approximate cap
-- Reply: 0 when the requests were counted and the window has room left; otherwise the epoch ms
-- the proxy rests until (a longer quarantine already held is kept: ZADD GT).
local now = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
local max_requests = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window_ms)
local held = redis.call('ZCARD', KEYS[1])

if held + n >= max_requests then
  redis.call('DEL', KEYS[1])
  redis.call('ZADD', KEYS[2], 'GT', ARGV[6], ARGV[7])
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'kind', 'quarantine', 'ref', ARGV[7])
  return tonumber(redis.call('ZSCORE', KEYS[2], ARGV[7]))
end

-- In chunks: unpack takes a few thousand values at most.
local i = 1
while i <= n do
  local members = {}
  local last = math.min(n, i + 499)
  for j = i, last do
    members[#members + 1] = now
    members[#members + 1] = ARGV[5] .. ':' .. j
  end
  redis.call('ZADD', KEYS[1], unpack(members))
  i = last + 1
end
-- An idle window goes by itself once its newest member has left it.
redis.call('PEXPIRE', KEYS[1], window_ms + 1000)
return 0
