-- pool_lead_renew: extend a connector's fetch lead only while it is still this lead, under the
-- generation it was taken in.
-- KEYS[1] the pool generation
-- KEYS[2] the connector's lead
-- ARGV[1] the lead's value ("holder|generation|epoch")
-- ARGV[2] the lead's generation
-- ARGV[3] time to live, milliseconds
-- Reply: 1 renewed; 0 the lead is gone; -1 another lead holds it; -2 the generation changed
if redis.call('GET', KEYS[1]) ~= ARGV[2] then
  return -2
end
local current = redis.call('GET', KEYS[2])
if current == false then
  return 0
end
if current ~= ARGV[1] then
  return -1
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
