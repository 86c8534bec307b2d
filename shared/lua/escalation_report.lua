-- escalation_report: folds one gateway's judged answers for a project into each site's
-- escalation state (shared/blocking/escalation.ts). A site's state is a JSON record in the
-- project's hash: t its tier (0 the cheapest), s since when (ms), b the block verdicts in a row
-- on its tier, p the good probes in a row on the tier below, n when requests may next probe
-- below (ms; 0 on tier 0), and what moved it last: w ('up' or 'down'), c the run that did, f the
-- tier it left. A report is a site's answers on one tier since the gateway's last report, summed
-- so that runs survive: whether a good answer came, the blocks after the last good one, whether
-- a block came, the good answers after the last block.
--   On the site's tier: a good answer ends the block run; a run of up_after_blocks moves the
--   site one tier up (when there is one), and probing waits probe_after_ms.
--   On the tier below once its probe time has come (probes): a block ends the probing for
--   probe_after_ms; a run of down_after_probes good ones moves the site down.
--   Any other tier, or the tier below before then (a stale view, a tier failed over to): not
--   counted.
-- A site on tier 0 with no run left is deleted; a new site is not added past the cap. The
-- version is raised whenever a tier or a probe time changes: gateways read the hash again then.
-- KEYS[1] the project's escalation hash (escalation:<project>)
-- KEYS[2] the project's escalation version (escalation:<project>:version)
-- ARGV[1] now, epoch ms
-- ARGV[2] up_after_blocks
-- ARGV[3] down_after_probes
-- ARGV[4] probe_after, ms
-- ARGV[5] the highest tier (tiers less one)
-- ARGV[6] the hash's TTL, seconds (refreshed by every report)
-- ARGV[7] sites kept per project at most
-- ARGV[8 ..] per site and tier, six values: site, tier, good seen (0/1), blocks after the last
--   good, block seen (0/1), goods after the last block
-- Reply: {moved up, moved down, probes failed}
local now = tonumber(ARGV[1])
local up_after = tonumber(ARGV[2])
local down_after = tonumber(ARGV[3])
local probe_after = tonumber(ARGV[4])
local top = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local cap = tonumber(ARGV[7])

local ups, downs, failed = 0, 0, 0
local changed = false
local size = nil

for i = 8, #ARGV, 6 do
  local site = ARGV[i]
  local tier = tonumber(ARGV[i + 1])
  local saw_ok = ARGV[i + 2] == '1'
  local blocks_after = tonumber(ARGV[i + 3])
  local saw_block = ARGV[i + 4] == '1'
  local oks_after = tonumber(ARGV[i + 5])
  local raw = redis.call('HGET', KEYS[1], site)
  local state
  if raw then
    state = cjson.decode(raw)
  else
    state = {t = 0, s = now, b = 0, p = 0, n = 0}
  end
  local before_t, before_n = state.t, state.n
  if state.t > top then
    state.t = top
    state.n = state.t > 0 and now + probe_after or 0
  end
  if tier == state.t then
    if saw_ok then state.b = blocks_after else state.b = state.b + blocks_after end
    if state.b >= up_after and state.t < top then
      state.f = state.t
      state.t = state.t + 1
      state.s = now
      state.w = 'up'
      state.c = state.b
      state.b = 0
      state.p = 0
      state.n = now + probe_after
      ups = ups + 1
    end
  elseif tier == state.t - 1 and now >= state.n then
    if saw_block then
      state.p = oks_after
      state.n = now + probe_after
      failed = failed + 1
    else
      state.p = state.p + oks_after
    end
    if state.p >= down_after then
      state.f = state.t
      state.t = state.t - 1
      state.s = now
      state.w = 'down'
      state.c = state.p
      state.b = 0
      state.p = 0
      state.n = state.t > 0 and now + probe_after or 0
      downs = downs + 1
    end
  end
  if state.t ~= before_t or state.n ~= before_n then changed = true end
  if state.t == 0 and state.b == 0 and state.w == nil then
    if raw then redis.call('HDEL', KEYS[1], site) end
  else
    if not raw then size = size or redis.call('HLEN', KEYS[1]) end
    if raw or size < cap then
      if not raw then size = size + 1 end
      redis.call('HSET', KEYS[1], site, cjson.encode(state))
    end
  end
end

redis.call('EXPIRE', KEYS[1], ttl)
if changed then
  redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ttl)
end
return {ups, downs, failed}
