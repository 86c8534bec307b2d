/**
 * The conditions read from what the install already knows, each made true the way the system
 * makes it (the lease key, a gateway's heartbeat and the feed's head, the per-site counts, a
 * connector's depletion mark, the sequence's row, the quarantine set, the failure history), so
 * an evaluation fires it, and made false again, so the next resolves it.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AlertEvaluator } from "../../control/alerts/evaluator.ts";
import { headJson } from "../../shared/feed/manifest.ts";
import { writeInstanceKeys } from "../../shared/instance-registry.ts";
import { countDay } from "../../shared/redis-keys.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let connectorId: string;
let otherConnectorId: string;

function admin(method: string, path: string, body?: unknown) {
  return h.request(method, path, { token: h.tokens.admin, body });
}

beforeAll(async () => {
  h = await startHarness();
  projectId = (await admin("POST", "/api/v1/projects", { name: "Watched", username: "watched" }))
    .body.id;
  const connector = (name: string) =>
    admin("POST", `/api/v1/projects/${projectId}/connectors`, { name, kind: "static" });
  connectorId = (await connector("first")).body.id;
  otherConnectorId = (await connector("second")).body.id;
});

afterAll(async () => {
  await h?.close();
});

/** A rule of `kind`, evaluated by `check` while the test holds it; deleted after. */
async function withRule(
  body: Record<string, unknown>,
  check: (judge: () => Promise<{ subject: string; resolved_at: string | null }[]>) => Promise<
    void
  >,
) {
  const made = await admin("POST", "/api/v1/alerts/rules", { name: String(body.kind), ...body });
  expect(made.status, made.text).toBe(201);
  const evaluator = new AlertEvaluator({ deps: h.deps, intervalMs: 60_000 });
  const judge = async () => {
    const outcome = await evaluator.evaluate();
    expect(outcome.skipped, "a condition could not be read").toBe(0);
    return (await admin("GET", "/api/v1/alerts/events")).body
      .filter((event: { rule_id: string }) => event.rule_id === made.body.id);
  };
  try {
    await check(judge);
  } finally {
    await admin("DELETE", `/api/v1/alerts/rules/${made.body.id}`);
  }
}

const open = (events: { subject: string; resolved_at: string | null }[]) =>
  events.filter((event) => event.resolved_at === null).map((event) => event.subject).sort();

describe("conditions", () => {
  test("controller_lease: no controller holds the lease", async () => {
    await withRule({ kind: "controller_lease" }, async (judge) => {
      expect(open(await judge())).toEqual(["controller"]);
      await h.deps.redis.set(h.deps.keys.controllerLease, "controller-1", "PX", 60_000);
      expect(open(await judge())).toEqual([]);
    });
  });

  test("feed_stale: a gateway behind a head older than the threshold", async () => {
    const { redis, keys } = h.deps;
    const beat = (digest: string) =>
      writeInstanceKeys(redis, keys, "gw-alerts", {
        role: "gateway",
        version: "test",
        started_at: new Date().toISOString(),
        ttl_ms: 60_000,
      }, JSON.stringify({ role: "gateway", feed: { applied_digest: digest } }));
    await beat("old-digest");
    await redis.set(keys.feedHead, headJson("new-digest", Date.now() - 5_000));
    await withRule({ kind: "feed_stale", threshold: 60 }, async (judge) => {
      // Compiled 5 s ago: within the minute, not stale yet.
      expect(open(await judge())).toEqual([]);
    });
    await withRule({ kind: "feed_stale", threshold: 2 }, async (judge) => {
      expect(open(await judge())).toEqual(["gateway:gw-alerts"]);
      await beat("new-digest");
      expect(open(await judge())).toEqual([]);
    });
  });

  test("domain_block_rate: a site's answers judged blocked today over the threshold", async () => {
    const key = h.deps.keys.domainCounts(projectId, countDay(Date.now()));
    await h.deps.redis.hset(key, {
      [`shop.example\t${connectorId}\tok`]: "5",
      [`shop.example\t${connectorId}\tblocked`]: "15",
      [`shop.example\t${connectorId}\trate_limited`]: "5",
      // Three answers, all blocked: too few to judge a rate by.
      [`rare.example\t${connectorId}\tblocked`]: "3",
    });
    await withRule(
      { kind: "domain_block_rate", threshold: 50, project_id: projectId },
      async (judge) => {
        const events = await judge();
        expect(open(events)).toEqual([`site:${projectId}:shop.example`]);
        await h.deps.redis.hset(key, `shop.example\t${connectorId}\tok`, "500");
        expect(open(await judge())).toEqual([]);
      },
    );
    await h.deps.redis.del(key);
  });

  test("pool_depleted: a connector marked depleted, until the mark clears", async () => {
    await withRule({ kind: "pool_depleted", project_id: projectId }, async (judge) => {
      expect(open(await judge())).toEqual([]);
      await h.deps.database
        .sql`update connectors set depleted_at = now() where id = ${connectorId}`;
      expect(open(await judge())).toEqual([`connector:${connectorId}`]);
      await h.deps.database.sql`update connectors set depleted_at = null where id = ${connectorId}`;
      expect(open(await judge())).toEqual([]);
    });
  });

  test("sequence_moved: each move fires its own event and resolves the one before", async () => {
    const put = await admin("PUT", `/api/v1/projects/${projectId}/sequence`, {
      connector_ids: [connectorId, otherConnectorId],
    });
    expect(put.status, put.text).toBe(200);
    await withRule({ kind: "sequence_moved", quiet_period_seconds: 0 }, async (judge) => {
      expect(open(await judge())).toEqual([]);
      await h.deps.database.sql`
        update project_sequences set current_index = 1 where project_id = ${projectId}`;
      expect(open(await judge())).toEqual([`sequence:${projectId}:1`]);
      await h.deps.database.sql`
        update project_sequences set exhausted = true where project_id = ${projectId}`;
      const events = await judge();
      expect(open(events)).toEqual([`sequence:${projectId}:exhausted`]);
      expect(events).toHaveLength(2);
      await h.deps.database.sql`
        update project_sequences set current_index = 0, exhausted = false
        where project_id = ${projectId}`;
      expect(open(await judge())).toEqual([]);
    });
  });

  test("quarantine_storm: a connector with the threshold of its proxies quarantined", async () => {
    const ids: string[] = [];
    for (const host of ["10.8.0.1", "10.8.0.2", "10.8.0.3"]) {
      const made = await admin("POST", `/api/v1/projects/${projectId}/proxies`, {
        connector_id: otherConnectorId,
        url: `http://${host}:3128`,
      });
      ids.push(made.body.id);
    }
    const until = Date.now() + 600_000;
    await h.deps.redis.zadd(h.deps.keys.proxyQuarantined, until, ids[0], until, ids[1]);
    // One ended already: not counted.
    await h.deps.redis.zadd(h.deps.keys.proxyQuarantined, Date.now() - 1_000, ids[2]);
    await withRule({ kind: "quarantine_storm", threshold: 3 }, async (judge) => {
      expect(open(await judge())).toEqual([]);
    });
    await withRule({ kind: "quarantine_storm", threshold: 2 }, async (judge) => {
      expect(open(await judge())).toEqual([`connector:${otherConnectorId}`]);
      await h.deps.redis.zrem(h.deps.keys.proxyQuarantined, ids[0]);
      expect(open(await judge())).toEqual([]);
    });
    await h.deps.redis.del(h.deps.keys.proxyQuarantined);
  });

  test("failure_flood: a project's failures of one kind in the last 15 minutes", async () => {
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 60_000).toISOString();
    const insert = (kind: string, count: number, at = minute) =>
      h.deps.database.sql`
        insert into failure_metrics (project_id, connector_id, kind, bucket_start, bucket_seconds,
          count)
        values (${projectId}, ${connectorId}, ${kind}, ${at}::timestamptz, 60, ${count})`;
    await insert("connect", 30);
    await insert("idle", 10);
    // Older than the window: not counted.
    await insert("idle", 100, new Date(Date.now() - 3_600_000).toISOString());
    await withRule(
      { kind: "failure_flood", threshold: 25, connector_id: connectorId },
      async (judge) => {
        expect(open(await judge())).toEqual([`failures:${projectId}:connect`]);
        await h.deps.database.sql`delete from failure_metrics where project_id = ${projectId}`;
        expect(open(await judge())).toEqual([]);
      },
    );
  });
});
