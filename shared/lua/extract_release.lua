-- extract_release: ends an extraction lease. Each entry the lease still holds is retired (state
-- draining, no lease, out of extracted: never routed or handed out again, kept until its expiry
-- so the provider handing it out again is a duplicate), unless its connector allowed reuse when
-- it was taken (the record's reuse_after_ms, 0 or more): then it goes back to checking, scored
-- by when it may be checked (now plus that), so it is checked again before anyone gets it.
-- Entries gone meanwhile (past their expiry) or held by no longer this lease are skipped. A sweep
-- (ARGV[4] 1) ends only a lease whose end has passed, so a renewal that won the race keeps it.
-- KEYS[1] the lease's hash
-- KEYS[2] the open leases zset
-- KEYS[3 .. 2+3n] per connector of the lease, three keys: its entries hash, extracted zset, checking zset
-- ARGV[1] now, epoch ms
-- ARGV[2] the lease's id
-- ARGV[3] the project the caller acts for; '' for any (a sweep)
-- ARGV[4] 1: only if the lease has ended (a sweep); 0: now (a release)
-- ARGV[5 .. 4+n] the connectors' ids, in KEYS order
-- Reply: {status, project, returned, retired, connector id...}: status 1 ended, with the
-- connectors whose entries were returned to checking; 0 no such lease; -1 another project's;
-- -2 not ended yet (sweep only); -3 the lease names a connector not given (read it again).
-- Nothing changes unless 1.
local now = tonumber(ARGV[1])
local lease_id = ARGV[2]

local fields = redis.call('HMGET', KEYS[1], 'project', 'end', 'entries')
local project, lease_end, refs = fields[1], fields[2], fields[3]
if not project then
  redis.call('ZREM', KEYS[2], lease_id)
  return {0, '', 0, 0}
end
if ARGV[3] ~= '' and ARGV[3] ~= project then return {-1, '', 0, 0} end
if ARGV[4] == '1' and tonumber(lease_end) > now then return {-2, project, 0, 0} end

local slot = {}
for i = 5, #ARGV do slot[ARGV[i]] = i - 5 end
local entries = cjson.decode(refs)
for _, ref in ipairs(entries) do
  local connector = string.match(ref, '^([^/]+)/')
  if slot[connector] == nil then return {-3, project, 0, 0} end
end

local returned, retired = 0, 0
local touched, reply_connectors = {}, {}
for _, ref in ipairs(entries) do
  local connector, id = string.match(ref, '^([^/]+)/(.+)$')
  local base = 3 + 3 * slot[connector]
  local raw = redis.call('HGET', KEYS[base], id)
  if raw then
    local e = cjson.decode(raw)
    if e.state == 'extracted' and e.lease == lease_id then
      local reuse_after = tonumber(e.reuse_after_ms)
      e.lease = cjson.null
      e.routed = false
      e.reuse_after_ms = nil
      redis.call('ZREM', KEYS[base + 1], id)
      if reuse_after ~= nil and reuse_after >= 0 then
        e.state = 'checking'
        redis.call('ZADD', KEYS[base + 2], now + reuse_after, id)
        returned = returned + 1
        if not touched[connector] then
          touched[connector] = true
          reply_connectors[#reply_connectors + 1] = connector
        end
      else
        e.state = 'draining'
        retired = retired + 1
      end
      redis.call('HSET', KEYS[base], id, cjson.encode(e))
    end
  end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], lease_id)
local reply = {1, project, returned, retired}
for _, connector in ipairs(reply_connectors) do reply[#reply + 1] = connector end
return reply
