/**
 * The `/api/v1/geo` routes over real Postgres and Redis (the api harness): databases uploaded,
 * inspected, edited, replaced and deleted, each refusal answered as the API says (a file that is
 * not its format: 422 naming it, a geofeed's bad lines by number, nothing stored), lookups
 * through the stack, the settings, the status, and the gateways' internal endpoint serving files
 * by checksum to the gateway token alone. Writes that change how exits are judged ask for
 * `reattribute all`.
 */
import { readFile } from "node:fs/promises";
import { count, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { geoDatabases, geoFiles } from "../../db/schema.ts";
import { INTERNAL_GEO_FILES } from "../../control/api/internal-geo.ts";
import { checksumOf } from "../../control/geo/files.ts";
import { shippedFile } from "../../control/geo/shipped.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import { JobKind } from "../../shared/roles.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

const IPV4_MMDB = new URL(
  "../../node_modules/@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country-ipv4.mmdb",
  import.meta.url,
);

let h: ApiHarness;
let mmdb: Uint8Array;

const GEOFEED = [
  "# our exits",
  "127.0.0.0/24,DE,DE-BE,Berlin,",
  "127.0.1.0/24,FR,FR-IDF,Paris,",
].join("\n");

const admin = () => h.tokens.admin;

async function upload(name: string, format: string, body: Uint8Array | string, extra = "") {
  return await h.request("POST", `/api/v1/geo/databases?name=${name}&format=${format}${extra}`, {
    token: admin(),
    ...(typeof body === "string" ? { text: body } : { bytes: body }),
  });
}

async function stored() {
  const db = h.deps.database.db;
  const [rows] = await db.select({ n: count() }).from(geoDatabases);
  const [files] = await db.select({ n: count() }).from(geoFiles);
  return { rows: rows.n, files: files.n };
}

/** Entries on the reattribute kind's stream, with their keys. */
async function reattributeAsks(): Promise<string[]> {
  const entries = await h.deps.redis.xrange(h.deps.keys.jobStream(JobKind.reattribute), "-", "+");
  return entries.map(([, fields]) => fields[fields.indexOf("key") + 1]);
}

beforeAll(async () => {
  h = await startHarness();
  mmdb = new Uint8Array(await readFile(IPV4_MMDB));
});

afterAll(async () => {
  await h?.close();
});

describe("uploads", () => {
  it("stores an mmdb whole, by its checksum, announces it and asks reattribute all", async () => {
    const asked = (await reattributeAsks()).length;
    const answer = await upload("whois-v4", "mmdb", mmdb);
    expect(answer.status, answer.text).toBe(201);
    expect(answer.body).toMatchObject({
      name: "whois-v4",
      format: "mmdb",
      origin: "upload",
      enabled: true,
      url: null,
      auth_type: null,
      checksum: checksumOf(mmdb),
      size_bytes: mmdb.byteLength,
    });
    expect(answer.body.entries).toBeGreaterThan(1000);
    expect(answer.body.version).toMatch(/\d{4}-\d{2}-\d{2}$/);
    expect(await h.changes()).toContainEqual({ kind: "geo", ref: answer.body.id });
    expect((await reattributeAsks()).slice(asked)).toEqual(["all"]);
  });

  it("refuses a file that is not the stated format with a 422 naming it, storing nothing", async () => {
    const before = await stored();
    const answer = await upload("not-mmdb", "mmdb", "127.0.0.0/24,DE\n");
    expect(answer.status).toBe(422);
    expect(answer.body.detail[0]).toMatchObject({ field: "body" });
    expect(answer.body.detail[0].message).toMatch(/^is not a mmdb file/);
    expect(await stored()).toEqual(before);
  });

  it("refuses a geofeed with bad lines, listing each by number, storing nothing", async () => {
    const before = await stored();
    const text = [
      "# exits",
      "127.0.0.0/24,DE,DE-BE,Berlin,",
      "127.0.0.1/24,DE,,,",
      "127.0.2.0/24,Germany,,,",
      "127.0.3.0/24,FR,DE-BE,,",
    ].join("\n");
    const answer = await upload("bad-feed", "geofeed", text);
    expect(answer.status).toBe(422);
    const messages = answer.body.detail.map((issue: { message: string }) => issue.message);
    expect(messages[0]).toMatch(/^is not a geofeed file: 3 lines refused/);
    expect(messages.slice(1)).toEqual([
      expect.stringMatching(/^line 3: /),
      expect.stringMatching(/^line 4: /),
      expect.stringMatching(/^line 5: /),
    ]);
    expect(await stored()).toEqual(before);
  });

  it("refuses a name taken (regardless of case) or the shipped database's, naming query.name", async () => {
    expect(await upload("exits", "geofeed", GEOFEED)).toMatchObject({ status: 201 });
    const taken = await upload("EXITS", "geofeed", GEOFEED);
    expect(taken.status).toBe(400);
    expect(taken.body.detail).toEqual([{ field: "query.name", message: expect.any(String) }]);
    const shipped = await upload("geo-whois-asn-country", "geofeed", GEOFEED);
    expect(shipped.status).toBe(400);
    expect(shipped.body.detail[0].field).toBe("query.name");
  });

  it("refuses a query without a name or with an unknown format, naming each", async () => {
    const answer = await h.request("POST", "/api/v1/geo/databases?format=csv", {
      token: admin(),
      text: GEOFEED,
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail.map((issue: { field: string }) => issue.field).sort()).toEqual([
      "query.format",
      "query.name",
    ]);
  });

  it("is for admins: an editor gets 403 and nothing is stored", async () => {
    const before = await stored();
    const answer = await h.request("POST", "/api/v1/geo/databases?name=mine&format=geofeed", {
      token: h.tokens.editor,
      text: GEOFEED,
    });
    expect(answer.status).toBe(403);
    expect(await stored()).toEqual(before);
    // Reading is for anyone signed in.
    const list = await h.request("GET", "/api/v1/geo/databases", { token: h.tokens.viewer });
    expect(list.status).toBe(200);
  });
});

describe("inspect", () => {
  it("answers what a file holds and stores nothing", async () => {
    const before = await stored();
    const answer = await h.request("POST", "/api/v1/geo/databases/inspect?format=geofeed", {
      token: admin(),
      text: GEOFEED,
    });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toEqual({
      format: "geofeed",
      checksum: checksumOf(new TextEncoder().encode(GEOFEED)),
      size_bytes: GEOFEED.length,
      entries: 2,
      version: null,
    });
    const wrong = await h.request("POST", "/api/v1/geo/databases/inspect?format=mmdb", {
      token: admin(),
      text: GEOFEED,
    });
    expect(wrong.status).toBe(422);
    expect(await stored()).toEqual(before);
  });
});

describe("one database's life", () => {
  let id: string;
  beforeAll(async () => {
    const answer = await upload("life", "geofeed", "127.0.9.0/24,NL,,Amsterdam,", "&position=-5");
    expect(answer.status, answer.text).toBe(201);
    id = answer.body.id;
  });

  it("looks addresses up through the stack: the first to place one answers, the shipped last", async () => {
    const lookup = await h.request("POST", "/api/v1/geo/lookup", {
      token: h.tokens.viewer,
      body: { ip: "127.0.9.7" },
    });
    expect(lookup.status, lookup.text).toBe(200);
    expect(lookup.body.answer).toEqual({
      country: "NL",
      region: null,
      city: "Amsterdam",
      asn: null,
      source: "life",
    });
    const names = lookup.body.databases.map((d: { name: string }) => d.name);
    expect(names[0]).toBe("life");
    expect(names.at(-1)).toBe("geo-whois-asn-country");
    const google = await h.request("POST", "/api/v1/geo/lookup", {
      token: h.tokens.viewer,
      body: { ip: "8.8.8.8" },
    });
    expect(google.body.answer).toMatchObject({ country: "US" });
    const bad = await h.request("POST", "/api/v1/geo/lookup", {
      token: h.tokens.viewer,
      body: { ip: "8.8.8" },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toEqual([{ field: "body.ip", message: expect.any(String) }]);
  });

  it("is edited: disabled (asking reattribute), renamed, refused download fields", async () => {
    const asked = (await reattributeAsks()).length;
    const disabled = await h.request("PATCH", `/api/v1/geo/databases/${id}`, {
      token: admin(),
      body: { enabled: false },
    });
    expect(disabled.status, disabled.text).toBe(200);
    expect(disabled.body.enabled).toBe(false);
    expect((await reattributeAsks()).slice(asked)).toEqual(["all"]);
    const lookup = await h.request("POST", "/api/v1/geo/lookup", {
      token: admin(),
      body: { ip: "127.0.9.7" },
    });
    expect(lookup.body.answer).toBeNull();

    const renamed = await h.request("PATCH", `/api/v1/geo/databases/${id}`, {
      token: admin(),
      body: { name: "life-2", position: 3 },
    });
    expect(renamed.body).toMatchObject({ name: "life-2", position: 3 });
    const url = await h.request("PATCH", `/api/v1/geo/databases/${id}`, {
      token: admin(),
      body: { update_interval_hours: 12 },
    });
    expect(url.status).toBe(400);
    const unknown = await h.request("PATCH", `/api/v1/geo/databases/${id}`, {
      token: admin(),
      body: { colour: "red" },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toEqual([{
      field: "body.colour",
      message: "is not a known field",
    }]);
  });

  it("takes a new file in place of the old (swapped whole), refusing a bad one", async () => {
    const before = await h.request("GET", `/api/v1/geo/databases/${id}`, { token: admin() });
    const bad = await h.request("PUT", `/api/v1/geo/databases/${id}/file`, {
      token: admin(),
      text: "127.0.9.0/24,Netherlands,,,",
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[1].message).toMatch(/^line 1: /);
    const same = await h.request("GET", `/api/v1/geo/databases/${id}`, { token: admin() });
    expect(same.body.checksum).toBe(before.body.checksum);

    const replaced = await h.request("PUT", `/api/v1/geo/databases/${id}/file`, {
      token: admin(),
      text: "127.0.9.0/24,BE,,Brussels,",
    });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body.checksum).not.toBe(before.body.checksum);
    expect(replaced.body.entries).toBe(1);
    // The old file stays until geo_update's next tick deletes what no row names.
    const [old] = await h.deps.database.db.select({ n: count() }).from(geoFiles)
      .where(eq(geoFiles.checksum, before.body.checksum));
    expect(old.n).toBe(1);

    const refresh = await h.request("POST", `/api/v1/geo/databases/${id}/refresh`, {
      token: admin(),
    });
    expect(refresh.status).toBe(400);
    expect(refresh.body.error).toMatch(/uploaded/);
  });

  it("answers 404 for an unknown id on every route, and deletes", async () => {
    const missing = "00000000-0000-4000-8000-000000000000";
    for (
      const [method, path] of [
        ["GET", `/api/v1/geo/databases/${missing}`],
        ["PATCH", `/api/v1/geo/databases/${missing}`],
        ["DELETE", `/api/v1/geo/databases/${missing}`],
        ["POST", `/api/v1/geo/databases/${missing}/refresh`],
        ["GET", "/api/v1/geo/databases/not-an-id"],
      ] as const
    ) {
      const answer = await h.request(method, path, {
        token: admin(),
        ...(method === "PATCH" ? { body: { enabled: true } } : {}),
      });
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.body.error).toBe("IP database not found");
    }
    const gone = await h.request("DELETE", `/api/v1/geo/databases/${id}`, { token: admin() });
    expect(gone.status).toBe(204);
    expect((await h.request("GET", `/api/v1/geo/databases/${id}`, { token: admin() })).status)
      .toBe(404);
  });
});

describe("settings and status", () => {
  it("reads and changes the settings; other sources ask reattribute all", async () => {
    const read = await h.request("GET", "/api/v1/geo/settings", { token: h.tokens.viewer });
    expect(read.body).toMatchObject({
      location_sources: ["database", "vendor", "endpoint"],
      location_conflict_rule: "consensus",
      observation_retention_days: 30,
      exit_ip_retention_days: null,
    });
    const asked = (await reattributeAsks()).length;
    const put = await h.request("PUT", "/api/v1/geo/settings", {
      token: admin(),
      body: { location_sources: ["vendor", "database"], location_conflict_rule: "first" },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({
      location_sources: ["vendor", "database"],
      location_conflict_rule: "first",
    });
    expect((await reattributeAsks()).slice(asked)).toEqual(["all"]);
    expect(await h.changes()).toContainEqual({ kind: "geo", ref: "settings" });
    // Retention alone changes no judgement.
    const retention = await h.request("PUT", "/api/v1/geo/settings", {
      token: admin(),
      body: { observation_retention_days: 7 },
    });
    expect(retention.body.observation_retention_days).toBe(7);
    expect((await reattributeAsks()).slice(asked)).toEqual(["all"]);
  });

  it("refuses bad settings naming the field, and non-admins", async () => {
    const bad = await h.request("PUT", "/api/v1/geo/settings", {
      token: admin(),
      body: { location_sources: ["database", "database"], location_conflict_rule: "vote" },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((issue: { field: string }) => issue.field).sort()).toEqual([
      "body.location_conflict_rule",
      "body.location_sources",
    ]);
    const empty = await h.request("PUT", "/api/v1/geo/settings", {
      token: admin(),
      body: { location_sources: [] },
    });
    expect(empty.status).toBe(422);
    const editor = await h.request("PUT", "/api/v1/geo/settings", {
      token: h.tokens.editor,
      body: { location_conflict_rule: "first" },
    });
    expect(editor.status).toBe(403);
  });

  it("says each database's version, age and size, and the shipped one", async () => {
    const status = await h.request("GET", "/api/v1/geo/status", { token: h.tokens.viewer });
    expect(status.status, status.text).toBe(200);
    const shipped = await shippedFile();
    expect(status.body.shipped).toEqual({
      name: "geo-whois-asn-country",
      format: "mmdb",
      checksum: shipped.checksum,
      size_bytes: shipped.sizeBytes,
    });
    const whois = status.body.databases.find((d: { name: string }) => d.name === "whois-v4");
    expect(whois).toMatchObject({ in_force: true, next_update_at: null, size_bytes: mmdb.length });
    expect(whois.age_seconds).toBeGreaterThanOrEqual(0);
  });
});

describe("the gateways' internal endpoint", () => {
  const fileUrl = (checksum: string) => `${INTERNAL_GEO_FILES}/${checksum}`;

  it("serves a stored file and the shipped one by checksum to the gateway token", async () => {
    const keys = await deriveFeedKeys(h.settings.internalSecret);
    const auth = { authorization: `Bearer ${keys.gatewayTokenHex}` };
    const answer = await h.app.request(fileUrl(checksumOf(mmdb)), { headers: auth });
    expect(answer.status).toBe(200);
    expect(checksumOf(new Uint8Array(await answer.arrayBuffer()))).toBe(checksumOf(mmdb));
    const shipped = await shippedFile();
    const packaged = await h.app.request(fileUrl(shipped.checksum), { headers: auth });
    expect(packaged.status).toBe(200);
    expect((await packaged.arrayBuffer()).byteLength).toBe(shipped.sizeBytes);
    const unknown = await h.app.request(fileUrl("0".repeat(64)), { headers: auth });
    expect(unknown.status).toBe(404);
  });

  it("refuses any other token: an admin's, none, a wrong one", async () => {
    for (const header of [`Bearer ${admin()}`, undefined, `Bearer ${"a".repeat(64)}`]) {
      const answer = await h.app.request(fileUrl(checksumOf(mmdb)), {
        headers: header === undefined ? {} : { authorization: header },
      });
      expect(answer.status).toBe(401);
    }
  });
});
