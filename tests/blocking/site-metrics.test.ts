/**
 * The per-site verdict counts on the gateway's /metrics: only the most judged sites are named
 * (OCTOPROX_METRICS_TOP_SITES of them), none unless asked, so site names never grow the series
 * without bound.
 */
import { describe, expect, it } from "vitest";
import { DomainCounts } from "../../gateway/blocking/domain-counts.ts";
import { redisKeys } from "../../shared/redis-keys.ts";

const counts = (topSites?: number) =>
  new DomainCounts({
    // Never written here: the samples are read from memory.
    redis: { pipeline: () => ({}) as never },
    keys: redisKeys("ox:unused:"),
    logger: { info() {}, warn() {} },
    writeTimeoutMs: 1_000,
    topSites,
  });

const siteSeries = (tally: DomainCounts) =>
  tally.samples().filter((sample) => sample.name === "octoprox_gateway_site_verdicts_total")
    .map((sample) => `${sample.labels} ${sample.value}`);

describe("per-site verdicts on /metrics", () => {
  it("names none unless asked", () => {
    const tally = counts();
    tally.judged("p1", "shop.example", "c1", "blocked", 10);
    expect(siteSeries(tally)).toEqual([]);
  });

  it("names the most judged sites only, each verdict a series", () => {
    const tally = counts(1);
    tally.judged("p1", "news.example", "c1", "ok", 0);
    for (let i = 0; i < 2; i++) tally.judged("p1", "shop.example", "c1", "blocked", 10);
    tally.judged("p1", "shop.example", "c2", "ok", 0);
    expect(siteSeries(tally)).toEqual([
      'project="p1",site="shop.example",verdict="ok" 1',
      'project="p1",site="shop.example",verdict="blocked" 2',
      'project="p1",site="shop.example",verdict="rate_limited" 0',
    ]);
  });
});
