-- extract: hands out a project's proxies exclusively, all at once. Picks available entries of the
-- given connectors' extraction stock (never a routed one: a gateway may be using it), the
-- longest-lived first, that pass the filters on their record; takes from each connector at most
-- its live stock less what its routed entries still lack of its gateway reserve, so the pool
-- job can still promote stock up to the reserve; marks them extracted under a new lease (out of
-- stock, into extracted scored by their expiry), opens the lease, and keeps the answer under
-- the Idempotency-Key when there is one. An Idempotency-Key seen before answers its stored
-- answer when the request is the same, and a conflict when it is not; either way nothing moves.
-- All or nothing short of stock changes nothing; an answer with no proxy keeps nothing.
-- KEYS[1] the idempotent answer's key (untouched when ARGV[6] is 0)
-- KEYS[2] the new lease's hash
-- KEYS[3] the open leases zset (score: the lease's end, ms)
-- KEYS[4 .. 3+4n] per connector, four keys: its entries hash, stock zset, routed zset, extracted zset
-- ARGV[1] now, epoch ms
-- ARGV[2] proxies asked for
-- ARGV[3] 1: all or nothing; 0: partial
-- ARGV[4] the new lease's id
-- ARGV[5] the lease's end, epoch ms
-- ARGV[6] how long the answer is kept under the Idempotency-Key, ms; 0 without one
-- ARGV[7] the request's digest (what a repeat with the same key must match)
-- ARGV[8] the least usable-until an entry may have, epoch ms (above now)
-- ARGV[9] the least checked-at an entry may have, epoch ms; -1 for any
-- ARGV[10] scheme wanted; '' for any
-- ARGV[11] country wanted (upper case); '' for any
-- ARGV[12] carrier wanted (lower case); '' for any
-- ARGV[13] the project's id
-- ARGV[14] entries looked at per connector at most (bounds the script's time under rare filters)
-- ARGV[15 .. 14+3n] per connector, in KEYS order, three values: its id, its gateway reserve, and
--   how long after a release its entries may be checked again, ms (-1: never; they retire).
--   Each taken record keeps the last as reuse_after_ms, which extract_release reads.
-- Reply: {'taken', lease id, lease end, record...}: the records handed out as now stored (lease
-- id '' and end 0 when none); {'short', eligible}: all or nothing and fewer were eligible;
-- {'replay', stored answer}: the answer kept for this key and request; {'conflict'}: the key
-- was used with another request.
local now = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local all_or_nothing = ARGV[3] == '1'
local lease_id = ARGV[4]
local lease_end = tonumber(ARGV[5])
local keep_ms = tonumber(ARGV[6])
local digest = ARGV[7]
local min_usable = tonumber(ARGV[8])
local min_checked = tonumber(ARGV[9])
local scheme, country, carrier = ARGV[10], ARGV[11], ARGV[12]
local cap = tonumber(ARGV[14])
local connectors = (#KEYS - 3) / 4

if keep_ms > 0 then
  local stored = redis.call('GET', KEYS[1])
  if stored then
    if cjson.decode(stored).digest == digest then return {'replay', stored} end
    return {'conflict'}
  end
end

local function eligible(e)
  if e.state ~= 'available' or e.routed == true then return false end
  if type(e.usable_until) ~= 'number' or e.usable_until < min_usable then return false end
  if min_checked >= 0 and (type(e.checked_at) ~= 'number' or e.checked_at < min_checked) then
    return false
  end
  if scheme ~= '' and e.scheme ~= scheme then return false end
  if country ~= '' and e.country ~= country then return false end
  if carrier ~= '' and (type(e.carrier) ~= 'string' or string.lower(e.carrier) ~= carrier) then
    return false
  end
  return true
end

local picked = {}
for c = 0, connectors - 1 do
  if #picked >= count then break end
  local entries, stock, routed = KEYS[4 + 4 * c], KEYS[5 + 4 * c], KEYS[6 + 4 * c]
  local reserve = tonumber(ARGV[16 + 3 * c])
  local allowance = redis.call('ZCOUNT', stock, '(' .. now, '+inf')
  if reserve > 0 then
    local lacking = reserve - redis.call('ZCOUNT', routed, '(' .. now, '+inf')
    if lacking > 0 then allowance = allowance - lacking end
  end
  local want = math.min(allowance, count - #picked)
  local offset, examined = 0, 0
  while want > 0 and examined < cap do
    local batch = math.min(cap - examined, math.max(want * 2, 8))
    local ids = redis.call('ZREVRANGEBYSCORE', stock, '+inf', min_usable, 'LIMIT', offset, batch)
    if #ids == 0 then break end
    offset = offset + #ids
    local raws = redis.call('HMGET', entries, unpack(ids))
    for i = 1, #ids do
      examined = examined + 1
      if raws[i] then
        local e = cjson.decode(raws[i])
        if eligible(e) then
          picked[#picked + 1] = {c, ids[i], e}
          want = want - 1
          if want == 0 then break end
        end
      end
    end
    if #ids < batch then break end
  end
end

if all_or_nothing and #picked < count then return {'short', #picked} end
if #picked == 0 then return {'taken', '', 0} end

local reply = {'taken', lease_id, lease_end}
local refs, records = {}, {}
for _, p in ipairs(picked) do
  local c, id, e = p[1], p[2], p[3]
  e.state = 'extracted'
  e.lease = lease_id
  e.reuse_after_ms = tonumber(ARGV[17 + 3 * c])
  local raw = cjson.encode(e)
  redis.call('HSET', KEYS[4 + 4 * c], id, raw)
  redis.call('ZREM', KEYS[5 + 4 * c], id)
  redis.call('ZADD', KEYS[7 + 4 * c], e.expires_at, id)
  refs[#refs + 1] = ARGV[15 + 3 * c] .. '/' .. id
  records[#records + 1] = raw
  reply[#reply + 1] = raw
end
redis.call('HSET', KEYS[2], 'project', ARGV[13], 'end', lease_end, 'created', now,
  'entries', cjson.encode(refs))
redis.call('ZADD', KEYS[3], lease_end, lease_id)
if keep_ms > 0 then
  redis.call('SET', KEYS[1], cjson.encode({
    digest = digest, lease = lease_id, lease_end = lease_end, requested = count, records = records,
  }), 'PX', keep_ms)
end
return reply
