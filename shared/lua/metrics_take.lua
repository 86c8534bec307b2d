-- metrics_take: moves metric windows of one kind into a metrics flush's staging hash. Each
-- window is staged, deleted and taken out of its index in one step, so no increment lands
-- between the read and the delete; a window metering recreates afterwards is listed again by
-- its own write and goes to the next flush. A window staged under this flush already is left
-- alone (a redelivery never overwrites what it staged), and so is one metering recreated since.
-- KEYS[1] the flush's staging hash (metrics:taken:<flush id>)
-- KEYS[2] the kind's index set (metrics:index:<kind>)
-- KEYS[3 ..] the windows to take (each listed in KEYS[2])
-- ARGV[1] the kind's name, the first item of each staged value
-- ARGV[2] the staging hash's TTL, seconds
-- ARGV[3 ..] the kind's field names, in declaration order
-- A staged value is "<kind>,<value of each field in order>" ('0' for a field the window lacks),
-- filed under the window's full key.
-- Reply: {staged, skipped, unlisted}: windows moved; windows staged under this flush already
-- (still listed, for the next flush); empty, missing or foreign-typed windows only unlisted.
local staging = KEYS[1]
local index = KEYS[2]
local kind = ARGV[1]
local ttl = ARGV[2]
local fieldCount = #ARGV - 2

local staged, skipped, unlisted = 0, 0, 0
for k = 3, #KEYS do
  local window = KEYS[k]
  if redis.call('HEXISTS', staging, window) == 1 then
    skipped = skipped + 1
  else
    local ok, flat = pcall(redis.call, 'HGETALL', window)
    if not ok or #flat == 0 then
      -- Gone, empty, or a foreign write of another type: nothing to count.
      redis.call('SREM', index, window)
      unlisted = unlisted + 1
    else
      local values = {}
      for i = 1, #flat, 2 do
        values[flat[i]] = flat[i + 1]
      end
      local parts = { kind }
      for f = 1, fieldCount do
        parts[f + 1] = values[ARGV[f + 2]] or '0'
      end
      redis.call('HSET', staging, window, table.concat(parts, ','))
      redis.call('DEL', window)
      redis.call('SREM', index, window)
      staged = staged + 1
    end
  end
end
if staged > 0 then
  redis.call('EXPIRE', staging, ttl)
end
return { staged, skipped, unlisted }
