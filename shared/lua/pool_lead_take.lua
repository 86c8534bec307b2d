-- pool_lead_take: take a provider-API connector's fetch lead when no one holds it.
-- The install's pool generation is made here when Redis has none (SET NX of a fresh random id),
-- so a Redis that lost its data starts a new generation, and nothing of an earlier one can pass
-- for this one's. Each lead taken gets the connector's next epoch: (generation, epoch) names one
-- lead for ever. The first lead of a generation clears the connector's fetch state (counts,
-- ledger, pacing, permits) of an earlier one.
-- KEYS[1] the pool generation
-- KEYS[2] the connector's lead: "holder|generation|epoch", with a TTL
-- KEYS[3] the connector's epoch counter
-- KEYS[4] the connector's fetch state hash
-- KEYS[5] the connector's permits zset
-- ARGV[1] the holder id (fresh for each lead)
-- ARGV[2] the lead's time to live, milliseconds
-- ARGV[3] a fresh random id: the generation, when Redis has none
-- Reply: {1, generation, epoch} taken; {0, generation} another holder has the lead
redis.call('SET', KEYS[1], ARGV[3], 'NX')
local generation = redis.call('GET', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {0, generation}
end
if redis.call('HGET', KEYS[4], 'generation') ~= generation then
  redis.call('DEL', KEYS[4], KEYS[5])
  redis.call('HSET', KEYS[4], 'generation', generation)
end
local epoch = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], ARGV[1] .. '|' .. generation .. '|' .. epoch, 'PX', ARGV[2])
return {1, generation, epoch}
