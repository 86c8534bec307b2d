-- metering_apply: adds one batch of gateway metering deltas to the metric windows and the demand
-- hashes, once per batch identity. A batch whose number is not above the one recorded for its
-- writer was applied before (a resend after a lost reply) and changes nothing.
-- Each window is listed in its kind's index after its increments, so a metrics flush that takes
-- the window never unlists one this script has just recreated.
-- A batch also asks for the traffic decisions of the limited connectors and projects its window
-- carried bytes of, appending each to the traffic job's stream, once with the batch.
-- KEYS[1] the writer's applied record (applied:<writer>)
-- KEYS[2] the traffic job's stream (jobs:traffic:stream)
-- KEYS[3 .. 2+w] the index set of each window kind ARGV declares, in declaration order
-- KEYS[3+w ..] the hashes (windows and demand hashes), in the order ARGV lists them
-- ARGV[1] batch number
-- ARGV[2] applied record's TTL, seconds
-- ARGV[3] window and index TTL, seconds (a safety bound; the metrics flush takes windows)
-- ARGV[4] demand hash TTL, seconds
-- ARGV[5] the traffic job stream's length cap (MAXLEN ~)
-- ARGV[6] a, the number of traffic decisions asked; ARGV[7 .. 6+a] their subjects
-- then k, the number of kinds declared
-- then per kind: mode ('w' a listed window, 'd' a demand hash), f, f pairs (field, 'i' or 'f')
-- then per hash: its kind's number (1 .. k) and f values, '0' for a field left as it is
-- Reply: {1, refused} applied, {0, 0} applied before (nothing changed). refused counts the
-- increments Redis refused (a key of another type, a field that holds no number): those deltas
-- are lost, the rest applied, so a foreign write can never wedge a writer's batches.
local batch = tonumber(ARGV[1])
local recorded = redis.call('GET', KEYS[1])
if recorded and tonumber(recorded) >= batch then
  return {0, 0}
end

local refused = 0
-- Out of memory refuses the first write, before anything changed: the batch fails whole and
-- stays owed. Any other refusal loses that one increment only.
local function write(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    if string.sub(reply.err, 1, 3) == 'OOM' then
      error(reply)
    end
    refused = refused + 1
    return false
  end
  return true
end

local appliedTtl = ARGV[2]
local windowTtl = ARGV[3]
local demandTtl = ARGV[4]
local streamCap = ARGV[5]
local askCount = tonumber(ARGV[6])
for a = 1, askCount do
  write('XADD', KEYS[2], 'MAXLEN', '~', streamCap, '*', 'key', ARGV[6 + a])
end
local kindCount = tonumber(ARGV[7 + askCount])

local kinds = {}
local at = 8 + askCount
local windowKinds = 0
for k = 1, kindCount do
  local kind = { mode = ARGV[at], names = {}, float = {} }
  local fieldCount = tonumber(ARGV[at + 1])
  at = at + 2
  for f = 1, fieldCount do
    kind.names[f] = ARGV[at]
    kind.float[f] = ARGV[at + 1] == 'f'
    at = at + 2
  end
  kind.fieldCount = fieldCount
  if kind.mode == 'w' then
    windowKinds = windowKinds + 1
    kind.index = KEYS[2 + windowKinds]
    kind.listed = false
  end
  kinds[k] = kind
end

local key = 3 + windowKinds
while at <= #ARGV do
  local kind = kinds[tonumber(ARGV[at])]
  local hash = KEYS[key]
  local touched = false
  for f = 1, kind.fieldCount do
    local value = ARGV[at + f]
    if value ~= '0' then
      local command = kind.float[f] and 'HINCRBYFLOAT' or 'HINCRBY'
      if write(command, hash, kind.names[f], value) then
        touched = true
      end
    end
  end
  if touched then
    if kind.mode == 'w' then
      write('SADD', kind.index, hash)
      redis.call('EXPIRE', hash, windowTtl)
      kind.listed = true
    else
      redis.call('EXPIRE', hash, demandTtl)
    end
  end
  at = at + 1 + kind.fieldCount
  key = key + 1
end

for k = 1, kindCount do
  if kinds[k].listed then
    redis.call('EXPIRE', kinds[k].index, windowTtl)
  end
end

redis.call('SET', KEYS[1], ARGV[1], 'EX', appliedTtl)
return {1, refused}
