/**
 * The attributor and its jobs against real Postgres and Redis (the api harness's stores): rows
 * placed by what the databases say of their exits, written forward only and announced once, a
 * country set by hand kept, and re-attribution by scope with the databases in force.
 */
import { eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { proxies } from "../../db/schema.ts";
import { Attributor } from "../../control/geo/attribution.ts";
import type { GeoJudging, GeoJudgingSource } from "../../control/geo/judging.ts";
import { ReattributeJob, scopesOf } from "../../control/jobs/attribution.ts";
import { DEFAULT_POLICY } from "../../shared/geo/attribute.ts";
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { GeoStack } from "../../shared/geo/stack.ts";
import { JobKind } from "../../shared/roles.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

/** The databases in force, as a test sets them: a geofeed of its own text. */
class Databases implements GeoJudgingSource {
  #judging: GeoJudging = { policy: DEFAULT_POLICY, stack: undefined };
  use(lines: string[]): void {
    this.#judging = {
      policy: DEFAULT_POLICY,
      stack: new GeoStack([openGeofeed("exits", lines.join("\n"))]),
    };
  }
  judging(): Promise<GeoJudging> {
    return Promise.resolve(this.#judging);
  }
}

let h: ApiHarness;
const databases = new Databases();
let attributor: Attributor;
let projectId: string;
let otherProjectId: string;
let connectorId: string;
let ids: string[];
let otherId: string;

const rows = async (list: string[]) =>
  new Map(
    (await h.deps.database.db.select().from(proxies).where(inArray(proxies.id, list)))
      .map((row) => [row.id, row]),
  );
const at = (ms: number) => new Date(Date.UTC(2026, 11, 5, 12, 0, 0) + ms);

async function staticProject(name: string, urls: (string | { url: string; country: string })[]) {
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name, username: name },
  });
  const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
    token: h.tokens.editor,
    body: { name: "static", kind: "static" },
  });
  const added: string[] = [];
  for (const entry of urls) {
    const body = typeof entry === "string" ? { url: entry } : entry;
    const answer = await h.request("POST", `/api/v1/projects/${project.body.id}/proxies`, {
      token: h.tokens.editor,
      body: { connector_id: connector.body.id, ...body },
    });
    expect(answer.status, answer.text).toBe(201);
    added.push(answer.body.id);
  }
  return { projectId: project.body.id as string, connectorId: connector.body.id as string, added };
}

beforeAll(async () => {
  h = await startHarness();
  attributor = new Attributor({ deps: h.deps, geo: databases });
  databases.use(["198.51.100.0/24,DE,DE-BE,Berlin,", "203.0.113.0/24,FR,,,"]);
  const made = await staticProject("exits", [
    "http://10.0.0.1:3128",
    "http://10.0.0.2:3128",
    { url: "http://10.0.0.3:3128", country: "US" },
  ]);
  ({ projectId, connectorId } = made);
  ids = made.added;
  const other = await staticProject("elsewhere", ["http://10.0.1.1:3128"]);
  otherProjectId = other.projectId;
  otherId = other.added[0];
});

afterAll(async () => {
  await h?.close();
});

describe("the attributor", () => {
  it("places each exit by the databases and says where the country came from", async () => {
    const before = (await h.changes()).length;
    const judged = await attributor.apply([
      { proxyId: ids[0], ip: "198.51.100.7", seenAt: at(0) },
      { proxyId: ids[1], ip: "203.0.113.9", seenAt: at(0) },
    ]);
    expect(judged.map((j) => [j.written, j.moved])).toEqual([[true, true], [true, true]]);
    const stored = await rows(ids);
    expect(stored.get(ids[0])).toMatchObject({
      country: "DE",
      countrySource: "database",
      locationConflict: false,
      location: {
        ip: "198.51.100.7",
        region: "DE-BE",
        city: "Berlin",
        asn: null,
        sources: [
          { source: "database", country: "DE", database: "exits" },
          { source: "vendor", country: null },
          { source: "endpoint", country: null },
        ],
      },
      locationCheckedAt: at(0),
    });
    expect(stored.get(ids[1])).toMatchObject({ country: "FR", countrySource: "database" });
    // One change entry for the batch, naming the connector whose section moves.
    const changes = (await h.changes()).slice(before);
    expect(changes).toEqual([{ kind: "proxy", ref: connectorId }]);
    expect(attributor.counts).toEqual({ judged: 2, written: 2, moved: 2, conflicts: 0 });
  });

  it("writes nothing, and announces nothing, when the same exit is judged the same again", async () => {
    const before = (await h.changes()).length;
    const judged = await attributor.apply([{ proxyId: ids[0], ip: "198.51.100.7", seenAt: at(5) }]);
    expect(judged[0]).toMatchObject({ written: false, moved: false });
    expect((await h.changes()).length).toBe(before);
    expect((await rows([ids[0]])).get(ids[0])!.locationCheckedAt).toEqual(at(0));
  });

  it("moves only forward: a sighting older than the row's last judgement changes nothing", async () => {
    await attributor.apply([{ proxyId: ids[0], ip: "203.0.113.1", seenAt: at(20) }]);
    expect((await rows([ids[0]])).get(ids[0])).toMatchObject({ country: "FR" });
    const late = await attributor.apply([{ proxyId: ids[0], ip: "198.51.100.7", seenAt: at(10) }]);
    expect(late[0].written).toBe(false);
    expect((await rows([ids[0]])).get(ids[0])).toMatchObject({
      country: "FR",
      location: { ip: "203.0.113.1" },
      locationCheckedAt: at(20),
    });
    // Within a batch, the newest sighting of a proxy is the one judged.
    await attributor.apply([
      { proxyId: ids[0], ip: "198.51.100.8", seenAt: at(40) },
      { proxyId: ids[0], ip: "203.0.113.2", seenAt: at(30) },
    ]);
    expect((await rows([ids[0]])).get(ids[0])).toMatchObject({
      country: "DE",
      location: { ip: "198.51.100.8" },
    });
  });

  it("keeps a country set by hand, and flags the sources that contradict it", async () => {
    const conflicts = attributor.counts.conflicts;
    await attributor.apply([{ proxyId: ids[2], ip: "198.51.100.9", seenAt: at(0) }]);
    expect(attributor.counts.conflicts).toBe(conflicts + 1);
    expect((await rows([ids[2]])).get(ids[2])).toMatchObject({
      country: "US",
      countrySource: "manual",
      locationConflict: true,
      location: { ip: "198.51.100.9", region: null, city: null },
    });
  });

  it("drops the cached preflight verdicts of exits that moved, and only those", async () => {
    const withVerdicts = new Attributor({ deps: h.deps, geo: databases, verdicts: h.deps });
    const key = (id: string) => h.deps.keys.preflightVerdict(projectId, id);
    await h.deps.redis.set(key(ids[1]), "cached");
    await h.deps.redis.set(key(ids[0]), "cached");
    const stored = await rows([ids[0]]);
    await withVerdicts.apply([
      // Another address: the verdict was about an exit the proxy no longer has.
      { proxyId: ids[1], ip: "203.0.113.77", seenAt: at(100) },
      // The same address seen again: the verdict stands.
      { proxyId: ids[0], ip: stored.get(ids[0])!.location!.ip, seenAt: at(100) },
    ]);
    expect(await h.deps.redis.exists(key(ids[1]))).toBe(0);
    expect(await h.deps.redis.exists(key(ids[0]))).toBe(1);
  });

  it("skips rows that are gone", async () => {
    const judged = await attributor.apply([{
      proxyId: "00000000-0000-4000-8000-000000000000",
      ip: "198.51.100.7",
      seenAt: at(0),
    }]);
    expect(judged).toEqual([]);
  });
});

describe("re-attribution", () => {
  it("reads a batch of asks as scopes: all covers every other", () => {
    expect(scopesOf(["project:" + projectId, "all", "junk"])).toEqual({ all: true, projects: [] });
    expect(scopesOf(["project:" + projectId, "project:" + projectId, "junk"])).toEqual({
      all: false,
      projects: [projectId],
    });
  });

  it("judges the stored exits again with the databases in force, in its scope only", async () => {
    await attributor.apply([{ proxyId: otherId, ip: "198.51.100.50", seenAt: at(0) }]);
    expect((await rows([otherId])).get(otherId)).toMatchObject({ country: "DE" });
    // The operator's new file says that block is in Austria now.
    databases.use(["198.51.100.0/24,AT,AT-9,Vienna,", "203.0.113.0/24,FR,,,"]);
    const job = new ReattributeJob({
      deps: h.deps,
      attributor,
      logger: h.deps.logger,
      pageRows: 1,
    });
    const signal = new AbortController().signal;
    await job.run({ keys: [`project:${projectId}`], ids: ["1-0"] } as never, signal);
    const stored = await rows([...ids, otherId]);
    expect(stored.get(ids[0])).toMatchObject({
      country: "AT",
      location: { ip: "198.51.100.8", region: "AT-9", city: "Vienna" },
    });
    expect(stored.get(ids[1])).toMatchObject({ country: "FR" });
    // Another project's rows wait for their own ask.
    expect(stored.get(otherId)).toMatchObject({ country: "DE" });
    await job.run({ keys: ["all"], ids: ["2-0"] } as never, signal);
    expect((await rows([otherId])).get(otherId)).toMatchObject({
      country: "AT",
      location: { city: "Vienna" },
    });
  });

  it("a project edit of how it judges asks for its exits to be judged again", async () => {
    const answer = await h.request("PATCH", `/api/v1/projects/${otherProjectId}`, {
      token: h.tokens.editor,
      body: { location_sources: ["vendor", "database"], location_conflict_rule: "first" },
    });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({
      location_sources: ["vendor", "database"],
      location_conflict_rule: "first",
    });
    const entries = await h.deps.redis.xrange(h.deps.keys.jobStream(JobKind.reattribute), "-", "+");
    expect(entries.map(([, fields]) => fields)).toContainEqual([
      "key",
      `project:${otherProjectId}`,
    ]);
    const refused = await h.request("PATCH", `/api/v1/projects/${otherProjectId}`, {
      token: h.tokens.editor,
      body: { location_sources: ["database", "database"] },
    });
    expect(refused.status).toBe(422);
    expect(refused.text).toContain("location_sources");
  });

  it("a proxy whose checks show no exit, added without a country, has its exit looked up", async () => {
    const checked = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.editor,
      body: { name: "own-check", kind: "static", healthcheck_url: "http://203.0.113.1/health" },
    });
    expect(checked.status, checked.text).toBe(201);
    const add = async (body: Record<string, unknown>) => {
      const answer = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
        token: h.tokens.editor,
        body: { connector_id: checked.body.id, ...body },
      });
      expect(answer.status, answer.text).toBe(201);
      return answer.body.id as string;
    };
    const unplaced = await add({ url: "http://10.0.2.1:3128" });
    const pinned = await add({ url: "http://10.0.2.2:3128", country: "NL" });
    const entries = await h.deps.redis.xrange(h.deps.keys.jobStream(JobKind.enrich), "-", "+");
    const asked = entries.map(([, fields]) => fields[1]);
    expect(asked).toContain(unplaced);
    // A country set by hand needs no lookup, and a proxy checked through the echo shows its
    // exit to its first check: neither is looked up.
    expect(asked).not.toContain(pinned);
    expect(asked).not.toContain(ids[0]);
    const row = await h.deps.database.db.select().from(proxies).where(eq(proxies.id, pinned));
    expect(row[0].countrySource).toBe("manual");
  });
});
