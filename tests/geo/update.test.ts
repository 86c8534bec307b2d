/**
 * URL databases and geo_update against a local HTTPS publisher (the egress guard admits loopback
 * with OCTOPROX_EGRESS_ALLOW_LOOPBACK and trusts the test CA): the first download made when an
 * admin adds one (a bad URL or file refused, nothing stored), `{YYYY}`/`{MM}` and basic auth,
 * gzip unpacked; then each tick downloads what is due and only that, swaps a new file in whole
 * (asking reattribute all), keeps the old one when the new one does not parse (recording
 * `last_error`), and deletes the files no database names any more.
 */
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { count, eq, sql } from "drizzle-orm";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { geoDatabases, geoFiles } from "../../db/schema.ts";
import { GeoDatabaseAnswer, GeoRefreshAnswer } from "../../control/api/answers/geo.ts";
import { checksumOf } from "../../control/geo/files.ts";
import { GeoUpdateJob } from "../../control/jobs/geo-update.ts";
import { JobKind } from "../../shared/roles.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { type FileOrigin, startFileOrigin } from "../../testkit/upstreams/file-origin.ts";

let h: ApiHarness;
let origin: FileOrigin;
let job: GeoUpdateJob;

const feed = (country: string) => `127.0.0.0/24,${country},,,\n`;
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

async function fromUrl(body: Record<string, unknown>) {
  return await h.request("POST", "/api/v1/geo/databases/from-url", { token: h.tokens.admin, body });
}

async function row(id: string) {
  const [found] = await h.deps.database.db.select().from(geoDatabases)
    .where(eq(geoDatabases.id, id));
  return found;
}

/** Makes a database due: its last download as long ago as two intervals. */
async function makeDue(id: string) {
  await h.deps.database.db.update(geoDatabases)
    .set({ lastUpdateAt: sql`now() - interval '49 hours'` })
    .where(eq(geoDatabases.id, id));
}

async function fileStored(checksum: string): Promise<boolean> {
  const [found] = await h.deps.database.db.select({ n: count() }).from(geoFiles)
    .where(eq(geoFiles.checksum, checksum));
  return found.n === 1;
}

async function reattributeAsks(): Promise<number> {
  return await h.deps.redis.xlen(h.deps.keys.jobStream(JobKind.reattribute));
}

beforeAll(async () => {
  origin = await startFileOrigin();
  const caFile = join(tmpdir(), `ox-geo-ca-${process.pid}.pem`);
  await writeFile(caFile, origin.ca);
  h = await startHarness({
    env: { OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true", OCTOPROX_EGRESS_CA_FILE: caFile },
  });
  job = new GeoUpdateJob({ deps: h.deps, logger: h.deps.logger });
});

afterAll(async () => {
  await h?.close();
  await origin?.close();
});

describe("adding a URL database", () => {
  it("downloads the first file at once, with {YYYY}/{MM} filled and basic auth sent", async () => {
    const now = new Date();
    const month = `${now.getUTCFullYear()}/${String(now.getUTCMonth() + 1).padStart(2, "0")}`;
    origin.put(`/feeds/${month}/exits.csv`, gzipSync(feed("DE")));
    origin.require(`/feeds/${month}/exits.csv`, basic("account", "licence-key"));
    const answer = await fromUrl({
      name: "monthly",
      format: "geofeed",
      url: `${origin.url}/feeds/{YYYY}/{MM}/exits.csv`,
      auth: { type: "basic", username: "account", password: "licence-key" },
      update_interval_hours: 24,
    });
    expect(answer.status, answer.text).toBe(201);
    // As declared (tests/api/answers.test.ts drives no download).
    expect(v.safeParse(GeoDatabaseAnswer, answer.body).issues).toBeUndefined();
    expect(answer.body).toMatchObject({
      origin: "url",
      auth_type: "basic",
      checksum: checksumOf(new TextEncoder().encode(feed("DE"))),
      entries: 1,
      last_error: null,
    });
    // The secret is never answered, nor logged.
    expect(answer.text).not.toContain("licence-key");
    expect(JSON.stringify(h.lines)).not.toContain("licence-key");
    expect(origin.paths.at(-1)).toBe(`/feeds/${month}/exits.csv`);
  });

  it("refuses a URL that gives no usable file, naming body.url, and stores nothing", async () => {
    origin.put("/broken.csv", "127.0.0.0/24,Germany,,,\n");
    const broken = await fromUrl({
      name: "broken",
      format: "geofeed",
      url: `${origin.url}/broken.csv`,
    });
    expect(broken.status).toBe(422);
    expect(broken.body.detail[0].field).toBe("body.url");
    expect(broken.body.detail[0].message).toMatch(/not a geofeed file.*line 1/);
    const missing = await fromUrl({ name: "missing", format: "mmdb", url: `${origin.url}/none` });
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0].message).toMatch(/answered 404/);
    const plain = await fromUrl({ name: "plain", format: "mmdb", url: "http://example.com/x" });
    expect(plain.status).toBe(422);
    expect(plain.body.detail).toEqual([{ field: "body.url", message: "must be an https:// URL" }]);
    const names = (await h.deps.database.db.select({ name: geoDatabases.name }).from(geoDatabases))
      .map((r) => r.name);
    expect(names).not.toContain("broken");
    expect(names).not.toContain("missing");
  });
});

describe("geo_update", () => {
  let id: string;
  let first: string;

  beforeAll(async () => {
    origin.put("/exits.csv", feed("FR"));
    const answer = await fromUrl({
      name: "exits",
      format: "geofeed",
      url: `${origin.url}/exits.csv`,
      update_interval_hours: 6,
    });
    expect(answer.status, answer.text).toBe(201);
    id = answer.body.id;
    first = answer.body.checksum;
  });

  it("downloads nothing that is not due", async () => {
    const before = origin.paths.length;
    const outcome = await job.update();
    expect(outcome).toMatchObject({ updated: [], unchanged: [], failed: [] });
    expect(origin.paths.length).toBe(before);
  });

  it("downloads a due database, swaps its new file in, asks reattribute, deletes the old file", async () => {
    origin.put("/exits.csv", feed("IT"));
    await makeDue(id);
    const asked = await reattributeAsks();
    const outcome = await job.update();
    expect(outcome.updated).toEqual(["exits"]);
    const updated = await row(id);
    expect(updated.checksum).toBe(checksumOf(new TextEncoder().encode(feed("IT"))));
    expect(updated.lastUpdateAt!.getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await reattributeAsks()).toBe(asked + 1);
    expect(await h.changes()).toContainEqual({ kind: "geo", ref: id });
    // The file the row no longer names is gone; the one it names stays.
    expect(outcome.filesDeleted).toBeGreaterThanOrEqual(1);
    expect(await fileStored(first)).toBe(false);
    expect(await fileStored(updated.checksum!)).toBe(true);
  });

  it("refuses a file that does not parse: the old one kept, last_error set", async () => {
    const before = await row(id);
    origin.put("/exits.csv", "127.0.0.0/33,IT,,,\n");
    await makeDue(id);
    const asked = await reattributeAsks();
    const outcome = await job.update();
    expect(outcome.failed).toEqual(["exits"]);
    const kept = await row(id);
    expect(kept.checksum).toBe(before.checksum);
    expect(kept.lastError).toMatch(/not a geofeed file.*line 1/);
    expect(kept.lastErrorAt).not.toBeNull();
    expect(await fileStored(before.checksum!)).toBe(true);
    expect(await reattributeAsks()).toBe(asked);
    // Still due: the next tick tries again, and a good file clears the error.
    origin.put("/exits.csv", feed("IT"));
    const again = await job.update();
    expect(again.unchanged).toEqual(["exits"]);
    expect((await row(id)).lastError).toBeNull();
  });

  it("refreshes on an admin's word, whatever the schedule", async () => {
    origin.put("/exits.csv", feed("ES"));
    const refreshed = await h.request("POST", `/api/v1/geo/databases/${id}/refresh`, {
      token: h.tokens.admin,
    });
    expect(refreshed.status, refreshed.text).toBe(200);
    expect(v.safeParse(GeoRefreshAnswer, refreshed.body).issues).toBeUndefined();
    expect(refreshed.body.outcome).toBe("updated");
    const lookup = await h.request("POST", "/api/v1/geo/lookup", {
      token: h.tokens.viewer,
      body: { ip: "127.0.0.9" },
    });
    expect(lookup.body.answer).toMatchObject({ country: "ES", source: "exits" });
    origin.put("/exits.csv", "nonsense");
    const failed = await h.request("POST", `/api/v1/geo/databases/${id}/refresh`, {
      token: h.tokens.admin,
    });
    expect(failed.body.outcome).toBe("failed");
    expect(failed.body.database.last_error).toMatch(/not a geofeed file/);
  });
});
