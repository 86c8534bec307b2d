/**
 * The gateway's geo_database_sync against a real api's internal endpoint (the api harness on a
 * socket) and a real shared folder: it fetches the files the feed's geo part lists by checksum,
 * with the gateway token, opens them and swaps its stack whole; a file whose bytes are not its
 * checksum is refused and the stack in force kept until the right file can be had; a replaced
 * database's new file swaps in. The feed's part is the compile's own (control/geo/feed-part.ts).
 */
import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { feedGeo, readFeedGeo } from "../../control/geo/feed-part.ts";
import { shippedFile } from "../../control/geo/shipped.ts";
import { GeoDatabaseSync } from "../../gateway/geo/sync.ts";
import { apiSource, folderSource } from "../../gateway/geo/sources.ts";
import { geoMetrics } from "../../gateway/geo/metrics.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import type { FeedGeo } from "../../shared/feed/models.ts";
import { SHIPPED_COUNTRY_DATABASE } from "../../shared/geo/shipped.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { waitUntil } from "../../testkit/wait.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let folder: string;
let token: string;
let databaseId: string;
const syncs: GeoDatabaseSync[] = [];

/** The feed's geo part as the compile makes it now. */
async function compiledGeo(): Promise<FeedGeo> {
  return feedGeo(await readFeedGeo(h.deps.database.db), await shippedFile());
}

async function readFolder(path: string): Promise<Uint8Array | undefined> {
  try {
    return new Uint8Array(await readFile(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

function sync(sources: ConstructorParameters<typeof GeoDatabaseSync>[0]["sources"]) {
  const made = new GeoDatabaseSync({ sources });
  syncs.push(made);
  void made.start();
  return made;
}

async function replaceFile(text: string): Promise<void> {
  const answer = await h.request("PUT", `/api/v1/geo/databases/${databaseId}/file`, {
    token: h.tokens.admin,
    text,
  });
  expect(answer.status, answer.text).toBe(200);
}

beforeAll(async () => {
  h = await startHarness();
  api = await listen(h.app);
  folder = await mkdtemp(join(tmpdir(), "ox-geo-folder-"));
  token = (await deriveFeedKeys(h.settings.internalSecret)).gatewayTokenHex;
  const answer = await h.request("POST", "/api/v1/geo/databases?name=exits&format=geofeed", {
    token: h.tokens.admin,
    text: "127.0.0.0/24,DE,DE-BE,Berlin,\n",
  });
  expect(answer.status, answer.text).toBe(201);
  databaseId = answer.body.id;
});

afterAll(async () => {
  await Promise.all(syncs.map((s) => s.stop()));
  await api?.close();
  await h?.close();
  if (folder) await rm(folder, { recursive: true, force: true });
});

describe("geo_database_sync", () => {
  it("fetches the listed files from the api by checksum and swaps its stack in", async () => {
    const fromApi = sync([apiSource(`http://127.0.0.1:${api.port}`, token)]);
    expect(fromApi.stack()).toBeUndefined();
    fromApi.offer(await compiledGeo());
    const stack = await waitUntil(() => fromApi.stack(), { message: "the first stack" });
    expect(stack.databases.map((d) => d.name)).toEqual(["exits", "geo-whois-asn-country"]);
    expect(stack.lookup("127.0.0.9")).toMatchObject({ country: "DE", city: "Berlin" });
    expect(stack.lookup("8.8.8.8")).toMatchObject({ country: "US" });
    expect(fromApi.stats()).toMatchObject({ loaded: 2, pending: false, fetched: 2, refused: 0 });
    expect(geoMetrics(fromApi.stats())).toContain(
      'octoprox_gateway_geo_database_entries{database="exits",format="geofeed"} 1',
    );

    // A replaced file: the next feed lists its new checksum, and the stack swaps whole.
    await replaceFile("127.0.0.0/24,FR,FR-IDF,Paris,\n");
    fromApi.offer(await compiledGeo());
    await waitUntil(() => fromApi.stack()?.lookup("127.0.0.9")?.country === "FR", {
      message: "the replaced file in force",
    });
    // Only the new file was fetched: the shipped one stayed open.
    expect(fromApi.stats()).toMatchObject({ fetched: 3, swaps: 2 });
  });

  it("refuses a file whose bytes are not its checksum, keeping the stack in force", async () => {
    const shipped = await shippedFile();
    await copyFile(SHIPPED_COUNTRY_DATABASE.url, join(folder, shipped.checksum));
    const fromFolder = sync([folderSource(folder, readFolder)]);
    let geo = await compiledGeo();
    await writeFile(join(folder, geo.databases[0].checksum), "127.0.0.0/24,FR,FR-IDF,Paris,\n");
    fromFolder.offer(geo);
    await waitUntil(() => fromFolder.stack(), { message: "the folder's stack" });
    expect(fromFolder.stack()!.lookup("127.0.0.9")?.country).toBe("FR");

    // The next file's name holds bytes of the same length that are not it.
    await replaceFile("127.0.0.0/24,ES,ES-MD,Madrid,\n");
    geo = await compiledGeo();
    const next = join(folder, geo.databases[0].checksum);
    await writeFile(next, "127.0.0.0/24,PT,PT-11,Lisboa,\n");
    fromFolder.offer(geo);
    const error = await waitUntil(() => fromFolder.stats().last_error, {
      message: "the refusal",
    });
    expect(error).toMatch(/its SHA-256 is .*not the feed's/);
    expect(fromFolder.stats()).toMatchObject({ pending: true, refused: 1 });
    expect(fromFolder.stack()!.lookup("127.0.0.9")?.country).toBe("FR");

    // The right file appears: the loop's next try swaps it in.
    await writeFile(next, "127.0.0.0/24,ES,ES-MD,Madrid,\n");
    await waitUntil(() => fromFolder.stack()?.lookup("127.0.0.9")?.country === "ES", {
      message: "the right file in force",
      timeoutMs: 15_000,
    });
    expect(fromFolder.stats()).toMatchObject({ pending: false, last_error: null });
  });

  it("asks the api with the gateway token only: another token gets nothing", async () => {
    const refused = sync([apiSource(`http://127.0.0.1:${api.port}`, "0".repeat(64))]);
    refused.offer(await compiledGeo());
    const error = await waitUntil(() => refused.stats().last_error, { message: "the refusal" });
    expect(error).toMatch(/answered 401/);
    expect(refused.stack()).toBeUndefined();
  });
});
