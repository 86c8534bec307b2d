-- metrics_restore: gives a metrics flush that will never commit its staged counts back to the
-- live windows and deletes its staging hash, in one step, so the next flush writes them and a
-- give-up repeated after it finds nothing to add twice. Each field goes back with the command
-- its declared type needs (HINCRBY for integers, HINCRBYFLOAT for floats: Redis refuses HINCRBY
-- on a field holding a fraction), and each window is listed in its kind's index again.
-- KEYS[1] the flush's staging hash (metrics:taken:<flush id>)
-- KEYS[2 .. 1+k] the index set of each kind ARGV declares, in declaration order
-- ARGV[1] window and index TTL, seconds
-- ARGV[2] k, the number of kinds declared
-- then per kind: its name, f, then f pairs (field name, 'i' or 'f')
-- Staged values are "<kind>,<value of each field in order>" under the window's full key
-- (metrics_take.lua).
-- Reply: {restored, unknown, refused}: windows given back; staged values of a kind not declared,
-- and increments Redis refused (a window key a foreign write gave another type): both lost.
local staging = KEYS[1]
local ttl = ARGV[1]
local kindCount = tonumber(ARGV[2])

local kinds = {}
local at = 3
for k = 1, kindCount do
  local kind = { names = {}, float = {}, index = KEYS[1 + k] }
  local name = ARGV[at]
  local fieldCount = tonumber(ARGV[at + 1])
  at = at + 2
  for f = 1, fieldCount do
    kind.names[f] = ARGV[at]
    kind.float[f] = ARGV[at + 1] == 'f'
    at = at + 2
  end
  kind.fieldCount = fieldCount
  kinds[name] = kind
end

local restored, unknown, refused = 0, 0, 0
local touched = {}
local flat = redis.call('HGETALL', staging)
for i = 1, #flat, 2 do
  local window = flat[i]
  local parts = {}
  for part in string.gmatch(flat[i + 1], '[^,]+') do
    parts[#parts + 1] = part
  end
  local kind = kinds[parts[1]]
  if kind == nil then
    unknown = unknown + 1
  else
    for f = 1, kind.fieldCount do
      local value = parts[f + 1]
      if value ~= nil and value ~= '0' then
        local command = kind.float[f] and 'HINCRBYFLOAT' or 'HINCRBY'
        local reply = redis.pcall(command, window, kind.names[f], value)
        if type(reply) == 'table' and reply.err then
          refused = refused + 1
        end
      end
    end
    redis.call('EXPIRE', window, ttl)
    redis.call('SADD', kind.index, window)
    touched[kind.index] = true
    restored = restored + 1
  end
end
for index in pairs(touched) do
  redis.call('EXPIRE', index, ttl)
end
redis.call('DEL', staging)
return { restored, unknown, refused }
