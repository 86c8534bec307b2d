-- scale_hold: write a cloud connector's creating entries, unless another run holds the purpose.
-- Of the runs that reach a scaling step (purpose `scale`), or a rotation of one proxy (purpose
-- `rotate:<proxy id>`), together, one writes and so one creates, with no lock and no other key:
-- the write is refused while the hash holds a fresh entry of the same purpose under a name not
-- given here. A run's own names are written again (a step refreshes its entries before each
-- further create), so a step longer than the freshness keeps them fresh.
-- KEYS[1] the connector's creating hash (scale:creating:<connector>)
-- ARGV[1] now, epoch milliseconds
-- ARGV[2] how long an entry stays fresh, milliseconds
-- ARGV[3] the purpose
-- ARGV[4 ..] the creation names to write
-- Reply: 1 written, 0 refused (a fresh entry of the purpose under another name)
local now = tonumber(ARGV[1])
local fresh = tonumber(ARGV[2])
local purpose = ARGV[3]
local mine = {}
for i = 4, #ARGV do mine[ARGV[i]] = true end
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  if not mine[flat[i]] then
    local ok, entry = pcall(cjson.decode, flat[i + 1])
    if ok and type(entry) == 'table' and entry.purpose == purpose
      and tonumber(entry.at) ~= nil and now - tonumber(entry.at) < fresh then
      return 0
    end
  end
end
local value = cjson.encode({ purpose = purpose, at = now })
for i = 4, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], value) end
return 1
