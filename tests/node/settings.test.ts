/**
 * A bad or missing required setting stops the control process before it does anything: exit
 * code 2 and one line on standard error naming the variable.
 */
import { afterAll, describe, expect, it } from "vitest";
import { WORKER_JOB_KINDS } from "../../shared/roles.ts";
import { parseControlSettings, parseGatewaySettings } from "../../shared/settings.ts";
import { controlEnv, killAll, spawnScript } from "../../testkit/processes.ts";

afterAll(killAll);

// No store is touched before the settings are checked, so these URLs are never dialled.
const valid = () =>
  controlEnv({
    databaseUrl: "postgres://postgres@127.0.0.1:1/none",
    redisUrl: "redis://127.0.0.1:1",
    prefix: "unused:",
    role: "all",
    port: 8000,
  });

async function runWith(env: Record<string, string | undefined>) {
  const run = spawnScript("control/main.ts", env);
  const exit = await run.exited;
  return { exit, stderr: run.stderr.filter(Boolean), stdout: run.stdout.filter(Boolean) };
}

describe("settings at start", () => {
  it("a bad API port exits 2 with one line naming it", async () => {
    const { exit, stderr, stdout } = await runWith({ ...valid(), OCTOPROX_API_PORT: "70000" });
    expect(exit.code).toBe(2);
    expect(stderr).toEqual(["octoprox: OCTOPROX_API_PORT must be a port number from 0 to 65535"]);
    expect(stdout).toEqual([]);
  });

  it("a missing database URL exits 2 with one line naming it", async () => {
    const { exit, stderr } = await runWith({ ...valid(), OCTOPROX_DATABASE_URL: undefined });
    expect(exit.code).toBe(2);
    expect(stderr).toEqual(["octoprox: OCTOPROX_DATABASE_URL is required but not set"]);
  });

  it("takes the tunnel status interval on both sides", () => {
    expect(parseControlSettings({ ...valid(), OCTOPROX_TUNNEL_STATUS_INTERVAL: "3" }))
      .toMatchObject({ tunnelStatusIntervalMs: 3_000 });
    expect(parseControlSettings(valid()).tunnelStatusIntervalMs).toBe(10_000);
    expect(() => parseControlSettings({ ...valid(), OCTOPROX_TUNNEL_STATUS_INTERVAL: "0" }))
      .toThrow(/OCTOPROX_TUNNEL_STATUS_INTERVAL must be a number of seconds from 1 to 300/);
  });

  it("the metrics jobs' intervals are still taken", () => {
    const settings = parseControlSettings({
      ...valid(),
      OCTOPROX_METRICS_FLUSH_INTERVAL: "30",
      OCTOPROX_COMPACTION_INTERVAL: "600",
      OCTOPROX_SYSTEM_METRICS_INTERVAL: "120",
    });
    expect(settings).toMatchObject({
      metricsFlushIntervalMs: 30_000,
      compactionIntervalMs: 600_000,
      systemMetricsIntervalMs: 120_000,
    });
  });

  it("OCTOPROX_GEO_UPDATER_INTERVAL is geo_update's period: an hour unless set, 60 s to a day", () => {
    expect(parseControlSettings(valid()).geoUpdaterIntervalMs).toBe(3_600_000);
    expect(
      parseControlSettings({ ...valid(), OCTOPROX_GEO_UPDATER_INTERVAL: "600" })
        .geoUpdaterIntervalMs,
    ).toBe(600_000);
    expect(() => parseControlSettings({ ...valid(), OCTOPROX_GEO_UPDATER_INTERVAL: "30" }))
      .toThrow(/OCTOPROX_GEO_UPDATER_INTERVAL must be a number of seconds from 60 to 86400/);
  });

  it("a bad role exits 2 with one line naming it", async () => {
    const { exit, stderr } = await runWith({ ...valid(), OCTOPROX_ROLE: "gatekeeper" });
    expect(exit.code).toBe(2);
    expect(stderr).toHaveLength(1);
    expect(stderr[0]).toMatch(/^octoprox: OCTOPROX_ROLE /);
  });
});

describe("OCTOPROX_WORKER_JOBS", () => {
  it("takes every kind a worker runs unless set", () => {
    expect(parseControlSettings(valid()).workerJobs).toEqual(WORKER_JOB_KINDS);
    expect(
      parseControlSettings({ ...valid(), OCTOPROX_WORKER_JOBS: "pool, health,pool" }).workerJobs,
    )
      .toEqual(["pool", "health"]);
  });

  it("refuses a job kind that does not exist", () => {
    expect(() => parseControlSettings({ ...valid(), OCTOPROX_WORKER_JOBS: "nonsense" })).toThrow(
      /OCTOPROX_WORKER_JOBS must be a comma-separated list of job kinds/,
    );
  });
});

describe("OCTOPROX_FEED_MAX_STALE", () => {
  const gateway = (value?: string) =>
    parseGatewaySettings({
      OCTOPROX_REDIS_URL: "redis://127.0.0.1:1",
      OCTOPROX_INTERNAL_SECRET: "x".repeat(32),
      OCTOPROX_FEED_MAX_STALE: value,
    });

  it("is off (0) unless set, and takes seconds", () => {
    expect(gateway().feedMaxStaleMs).toBe(0);
    expect(gateway("0").feedMaxStaleMs).toBe(0);
    expect(gateway("90").feedMaxStaleMs).toBe(90_000);
    expect(gateway("1.5").feedMaxStaleMs).toBe(1_500);
  });

  it("refuses a bound under a second, a negative one and a word, naming the setting", () => {
    for (const bad of ["0.5", "-1", "soon", "86401"]) {
      expect(() => gateway(bad)).toThrow(
        /OCTOPROX_FEED_MAX_STALE must be 0 \(off\) or a number of seconds from 1 to 86400/,
      );
    }
  });
});

describe("the gateway's Redis over HTTP", () => {
  const gateway = (env: Record<string, string | undefined>) =>
    parseGatewaySettings({ OCTOPROX_INTERNAL_SECRET: "x".repeat(32), ...env });

  it("takes a REST endpoint's URL with its token, and polls the feed every second unless told", () => {
    const settings = gateway({
      OCTOPROX_REDIS_URL: "https://eu1-example.upstash.io",
      OCTOPROX_REDIS_TOKEN: "AXXXtoken",
    });
    expect(settings.redisUrl).toBe("https://eu1-example.upstash.io");
    expect(settings.redisToken).toBe("AXXXtoken");
    expect(settings.feedPollIntervalMs).toBe(1_000);
    expect(
      gateway({
        OCTOPROX_REDIS_URL: "http://127.0.0.1:8079",
        OCTOPROX_REDIS_TOKEN: "t",
        OCTOPROX_FEED_POLL_INTERVAL: "0.25",
      }).feedPollIntervalMs,
    ).toBe(250);
  });

  it("refuses an HTTP URL without a token, and a token or a poll interval with a TCP URL", () => {
    expect(() => gateway({ OCTOPROX_REDIS_URL: "https://eu1-example.upstash.io" })).toThrow(
      /^OCTOPROX_REDIS_TOKEN is required with an https:\/\/ OCTOPROX_REDIS_URL/,
    );
    expect(() => gateway({ OCTOPROX_REDIS_URL: "redis://127.0.0.1:1", OCTOPROX_REDIS_TOKEN: "t" }))
      .toThrow(/^OCTOPROX_REDIS_TOKEN applies to an https:\/\/ OCTOPROX_REDIS_URL only/);
    expect(() =>
      gateway({ OCTOPROX_REDIS_URL: "redis://127.0.0.1:1", OCTOPROX_FEED_POLL_INTERVAL: "1" })
    ).toThrow(/^OCTOPROX_FEED_POLL_INTERVAL applies to an https:\/\/ OCTOPROX_REDIS_URL only/);
    for (const bad of ["0.05", "31", "often"]) {
      expect(() =>
        gateway({
          OCTOPROX_REDIS_URL: "https://eu1-example.upstash.io",
          OCTOPROX_REDIS_TOKEN: "t",
          OCTOPROX_FEED_POLL_INTERVAL: bad,
        })
      ).toThrow(/^OCTOPROX_FEED_POLL_INTERVAL must be a number of seconds from 0.1 to 30/);
    }
  });

  it("is refused by the control plane, which speaks TCP only: exit 2 naming it", async () => {
    const { exit, stderr } = await runWith({
      ...valid(),
      OCTOPROX_REDIS_URL: "https://eu1-example.upstash.io",
    });
    expect(exit.code).toBe(2);
    expect(stderr).toEqual([
      "octoprox: OCTOPROX_REDIS_URL must be a redis:// or rediss:// URL: the control plane " +
      "speaks to Redis over TCP only (a REST endpoint's https:// URL serves gateways)",
    ]);
  });
});
