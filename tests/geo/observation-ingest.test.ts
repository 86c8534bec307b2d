/**
 * The observation ingest over real Postgres and Redis: batches of the same observations in either
 * order leave the same exit table (the newest state wins, first and last seen move outward); a
 * hand-out is counted once across a redelivery and across two workers, and a late observation
 * counts none; without a proxy's record Postgres decides (its own exit is no hand-out, any other
 * is); the loop completes entries it cannot read, cuts long ids and keeps the log rows of a
 * connector that is gone; the compaction job removes what is past the install's retentions.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ingestObservations, ObservationIngest } from "../../control/geo/observation-ingest.ts";
import { CompactionJob } from "../../control/jobs/compaction.ts";
import { createRedis } from "../../control/core/redis.ts";
import {
  encodeObservation,
  MAX_INSTANCE_ID_CHARS,
  MAX_SESSION_ID_CHARS,
  type Observation,
  OBSERVATION_FIELD,
} from "../../shared/geo/observation-wire.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { waitUntil } from "../../testkit/wait.ts";

let h: ApiHarness;
let projectId: string;
const BASE = Date.UTC(2026, 10, 1, 12);
const at = (seconds: number) => BASE + seconds * 1000;

beforeAll(async () => {
  h = await startHarness();
  projectId = (await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Exits", username: "exits" },
  })).body.id;
});

afterAll(async () => {
  await h?.close();
});

async function connector(name: string): Promise<string> {
  const answer = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name, kind: "static" },
  });
  expect(answer.status, answer.text).toBe(201);
  return answer.body.id;
}

async function proxy(connectorId: string, host: string): Promise<string> {
  const answer = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connectorId, url: `http://u:p@${host}:8080` },
  });
  expect(answer.status, answer.text).toBe(201);
  return answer.body.id;
}

function seen(
  connectorId: string | null,
  ip: string,
  atMs: number,
  more: Partial<Observation> = {},
): Observation {
  return {
    observedAt: atMs,
    ip,
    projectId,
    connectorId,
    proxyId: null,
    source: "health",
    country: null,
    region: null,
    city: null,
    asn: null,
    claimedCountry: null,
    sources: [],
    ...more,
  };
}

const ingest = (observations: Observation[]) => ingestObservations(h.deps, observations);

interface ExitRow {
  ip: string;
  first_seen_at: string;
  last_seen_at: string;
  state_at: string;
  country: string | null;
  region: string | null;
  city: string | null;
  asn: number | null;
  claimed_country: string | null;
  sources: string[];
  observations: string;
  hand_outs: string;
}

/** A time column as ISO 8601 in UTC (the pool hands timestamps back as Postgres writes them). */
const ISO = (column: string) =>
  h.deps.database.sql.unsafe(
    `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
  );
const iso = (ms: number) => new Date(ms).toISOString();

async function exits(connectorId: string): Promise<ExitRow[]> {
  return await h.deps.database.sql<ExitRow[]>`
    select ip, ${ISO("first_seen_at")} as first_seen_at, ${ISO("last_seen_at")} as last_seen_at,
      ${ISO("state_at")} as state_at, country, region, city, asn, claimed_country, sources,
      observations::text, hand_outs::text
    from connector_exit_ips where connector_id = ${connectorId} order by ip`;
}

async function handOutsOn(connectorId: string): Promise<Record<string, number>> {
  return Object.fromEntries((await exits(connectorId)).map((e) => [e.ip, Number(e.hand_outs)]));
}

describe("the exit table", () => {
  it("is the same whichever order batches come in, and holds the newest state", async () => {
    const [a, b] = [await connector("order-a"), await connector("order-b")];
    const batches = (c: string) => [
      [
        seen(c, "203.0.113.1", at(30), { country: "FR", claimedCountry: "DE", sources: ["db"] }),
        seen(c, "203.0.113.2", at(50), { country: "AT", asn: 1 }),
      ],
      [
        seen(c, "203.0.113.1", at(10), { country: "DE", region: "DE-BE", city: "Berlin" }),
        seen(c, "203.0.113.1", at(20), { country: "NL", claimedCountry: "NL" }),
        // The same millisecond as the other batch's: their content orders them, alike everywhere.
        seen(c, "203.0.113.2", at(50), { country: "CH", asn: 2 }),
      ],
    ];
    const [first, second] = batches(a);
    await ingest(first);
    await ingest(second);
    const [earlier, later] = batches(b);
    await ingest(later);
    await ingest(earlier);

    const rowsA = await exits(a);
    expect(await exits(b)).toEqual(rowsA);
    expect(rowsA[0]).toMatchObject({
      ip: "203.0.113.1",
      first_seen_at: iso(at(10)),
      last_seen_at: iso(at(30)),
      state_at: iso(at(30)),
      country: "FR",
      region: null,
      claimed_country: "DE",
      sources: ["db"],
      observations: "3",
    });
    expect(rowsA[1]).toMatchObject({ ip: "203.0.113.2", observations: "2" });
    expect(["AT", "CH"]).toContain(rowsA[1].country);
  });
});

describe("hand-outs", () => {
  it("count once across a redelivery and across two workers; a late observation counts none", async () => {
    const c = await connector("hand-outs");
    // A static proxy exiting at its own address: its first sighting there is no hand-out.
    const p = await proxy(c, "192.0.2.10");
    const on = (ip: string, s: number) => seen(c, ip, at(s), { proxyId: p });
    await ingest([on("192.0.2.10", 100)]);
    expect(await handOutsOn(c)).toEqual({ "192.0.2.10": 0 });

    // Moved: one hand-out. The same batch delivered again counts none (and logs its rows again).
    const moved = [on("192.0.2.20", 110)];
    expect((await ingest(moved)).handOuts).toBe(1);
    expect((await ingest(moved)).handOuts).toBe(0);
    expect(await handOutsOn(c)).toEqual({ "192.0.2.10": 0, "192.0.2.20": 1 });
    const [{ logged }] = await h.deps.database.sql<{ logged: number }[]>`
      select count(*)::int as logged from ip_observations
      where proxy_id = ${p} and observed_at = ${iso(at(110))}::timestamptz`;
    expect(logged).toBe(2);

    // Back, the batch taken by two workers at once (a reclaim while the first still ran).
    const second = {
      ...h.deps,
      redis: createRedis(h.settings.redisUrl),
    };
    await waitUntil(() => second.redis.status === "ready", {
      message: "the second worker's Redis",
    });
    try {
      const back = [on("192.0.2.10", 120)];
      const outcomes = await Promise.all([ingest(back), ingestObservations(second, back)]);
      expect(outcomes.map((o) => o.handOuts).sort()).toEqual([0, 1]);
    } finally {
      second.redis.disconnect();
    }
    expect(await handOutsOn(c)).toEqual({ "192.0.2.10": 1, "192.0.2.20": 1 });

    // Late: older than the record, so no hand-out, and the record stays where it was.
    expect((await ingest([on("192.0.2.30", 115)])).handOuts).toBe(0);
    expect(await h.deps.redis.get(h.deps.keys.proxyLastExit(p))).toBe(`${at(120)} 192.0.2.10`);
    expect(await handOutsOn(c)).toEqual({ "192.0.2.10": 1, "192.0.2.20": 1, "192.0.2.30": 0 });
  });

  it("without a proxy's record, its own exit is no hand-out and any other is", async () => {
    const c = await connector("no-record");
    const moved = await proxy(c, "10.9.9.1");
    const staticOwn = await proxy(c, "198.51.100.50");
    const attributed = await proxy(c, "10.9.9.3");
    const taker = await proxy(c, "10.9.9.4");
    const fresh = await proxy(c, "10.9.9.5");
    await h.deps.database.sql`
      update proxies set location = ${JSON.stringify({ ip: "198.51.100.77" })}::jsonb
      where id = ${attributed}`;
    // The first proxy was logged on an exit (new to the connector, and not its address: a
    // hand-out), then Redis lost its record (a wipe).
    expect((await ingest([seen(c, "198.51.100.1", at(200), { proxyId: moved })])).handOuts)
      .toBe(1);
    await h.deps.redis.del(h.deps.keys.proxyLastExit(moved));

    const outcome = await ingest([
      seen(c, "198.51.100.1", at(210), { proxyId: moved }), // its last logged exit
      seen(c, "198.51.100.50", at(210), { proxyId: staticOwn }), // its own address
      seen(c, "198.51.100.77", at(210), { proxyId: attributed }), // its attributed exit
      seen(c, "198.51.100.1", at(211), { proxyId: taker }), // one another proxy held
      seen(c, "198.51.100.99", at(210), { proxyId: fresh }), // new to the connector
    ]);
    expect(outcome.handOuts).toBe(2);
    expect(await handOutsOn(c)).toEqual({
      "198.51.100.1": 2,
      "198.51.100.50": 0,
      "198.51.100.77": 0,
      "198.51.100.99": 1,
    });
    // Each now has a record: the next sighting is judged by it.
    expect(await h.deps.redis.get(h.deps.keys.proxyLastExit(fresh)))
      .toBe(`${at(210)} 198.51.100.99`);
  });
});

describe("the ingest loop", () => {
  it("completes entries it cannot read, cuts long ids, logs a gone connector's rows only", async () => {
    const c = await connector("loop");
    const gone = randomUUID();
    const { logger, lines } = captureLogger("worker");
    const loop = new ObservationIngest({
      database: h.deps.database,
      redis: h.deps.redis,
      keys: h.deps.keys,
      settings: h.settings,
      logger,
      consumer: "t-worker:1",
    });
    void loop.start();
    try {
      const stream = h.deps.keys.observationsStream;
      const entry = (value: string) => h.deps.redis.xadd(stream, "*", OBSERVATION_FIELD, value);
      await h.deps.redis.xadd(stream, "*", "other", "a newer release's field");
      await entry("{not json");
      await entry(JSON.stringify({ v: 2, observed_at: at(300) }));
      await entry(encodeObservation(seen(c, "203.0.113.80", at(300), {
        sessionId: "s".repeat(400),
        instanceId: "i".repeat(100),
        source: "preflight",
      })));
      await entry(encodeObservation(seen(gone, "203.0.113.81", at(300))));
      await waitUntil(
        async () =>
          (await h.deps.redis.xlen(stream)) === 0 && loop.snapshot().observations_ingested === 2,
        { message: "every entry handled and completed" },
      );
    } finally {
      await loop.stop();
    }
    expect(loop.snapshot()).toMatchObject({
      observations_ingested: 2,
      observations_malformed: 2,
      observations_without_connector: 1,
    });
    expect(lines.map((line) => line.msg)).toContain(
      "Observations this release cannot read; completed unwritten",
    );
    const rows = await h.deps.database.sql<
      { ip: string; session_id: string; instance_id: string; connector_id: string }[]
    >`
      select ip, session_id, instance_id, connector_id::text from ip_observations
      where ip in ('203.0.113.80', '203.0.113.81') order by ip`;
    expect(rows.map((r) => [r.ip, r.connector_id])).toEqual([
      ["203.0.113.80", c],
      ["203.0.113.81", gone],
    ]);
    expect(rows[0].session_id).toHaveLength(MAX_SESSION_ID_CHARS);
    expect(rows[0].instance_id).toHaveLength(MAX_INSTANCE_ID_CHARS);
    expect((await exits(c)).map((e) => e.ip)).toEqual(["203.0.113.80"]);
    const [{ count }] = await h.deps.database.sql<{ count: number }[]>`
      select count(*)::int from connector_exit_ips where connector_id = ${gone}`;
    expect(count).toBe(0);
  });
});

describe("retention", () => {
  it("removes raw observations and exits past the install's retentions at compaction", async () => {
    const c = await connector("retention");
    const now = Date.UTC(2027, 5, 1);
    const daysAgo = (days: number) => now - days * 86_400_000;
    await ingest([
      seen(c, "203.0.113.200", daysAgo(40)),
      seen(c, "203.0.113.201", daysAgo(8)),
      seen(c, "203.0.113.202", daysAgo(2)),
    ]);
    const compaction = new CompactionJob({
      database: h.deps.database,
      logger: captureLogger("worker").logger,
      now: () => now,
    });
    const kept = async () => ({
      log: (await h.deps.database.sql<{ ip: string }[]>`
        select ip from ip_observations where connector_id = ${c} order by ip`).map((r) => r.ip),
      exits: (await exits(c)).map((e) => e.ip),
    });

    // The defaults: raw observations 30 days, exits kept.
    await compaction.compact();
    expect(await kept()).toEqual({
      log: ["203.0.113.201", "203.0.113.202"],
      exits: ["203.0.113.200", "203.0.113.201", "203.0.113.202"],
    });

    await h.deps.database.sql`
      update geo_settings set observation_retention_days = 5, exit_ip_retention_days = 7`;
    const outcome = await compaction.compact();
    expect(outcome.observationsExpired).toBeGreaterThanOrEqual(1);
    expect(outcome.exitIpsExpired).toBeGreaterThanOrEqual(2);
    expect(await kept()).toEqual({ log: ["203.0.113.202"], exits: ["203.0.113.202"] });
  });
});
