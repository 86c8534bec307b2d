/**
 * Extraction without Postgres: on a private Postgres stopped mid-test, a key and a connector
 * list the process has read keep serving extractions (every request finding them due for a
 * refresh that fails), while a key never seen is a 503; once Postgres is back, fresh reads
 * resume.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { LocalPostgres } from "../../../scripts/local-stores.ts";
import { freePort } from "../../../testkit/ports.ts";
import { waitUntil } from "../../../testkit/wait.ts";
import {
  createConnector,
  createKey,
  createProject,
  type ExtractionBed,
  fill,
  startBed,
} from "../../../testkit/extraction.ts";

let folder: string;
let postgres: LocalPostgres;
let bed: ExtractionBed;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "octoprox-extraction-outage-"));
  // Postgres runs as its own user when we are root: it must be able to reach its folder.
  await chmod(folder, 0o755);
  postgres = new LocalPostgres({ dir: join(folder, "postgres"), port: await freePort() });
  await postgres.start();
  await postgres.createDatabase("octoprox_extraction");
  // Everything read is due for a refresh at once: each request tries Postgres and falls back.
  bed = await startBed({
    databaseUrl: postgres.url("octoprox_extraction"),
    extraction: { keyFreshMs: 0, connectorsFreshMs: 0 },
  });
}, 120_000);

afterAll(async () => {
  await bed?.close();
  await postgres?.stop();
  await rm(folder, { recursive: true, force: true });
});

describe("Postgres away", () => {
  test("extraction goes on with what it read; an unknown key is a 503", async () => {
    const projectId = await createProject(bed.h, "outage");
    const connectorId = await createConnector(bed.h, projectId, { name: "pool", reserve: 0 });
    await fill(bed.store, { id: connectorId, projectId }, 20, 0);
    const { key } = await createKey(bed.h, projectId);
    const unseen = await createKey(bed.h, projectId);
    const extract = (k: string) =>
      bed.call("POST", `/api/v1/projects/${projectId}/extract`, { key: k, body: { count: 1 } });
    expect((await extract(key)).status).toBe(200);

    await postgres.stop();
    for (let i = 0; i < 5; i++) {
      const answer = await extract(key);
      expect(answer.status, answer.text).toBe(200);
      expect(answer.body.returned).toBe(1);
    }
    const cold = await extract(unseen.key);
    expect(cold.status).toBe(503);
    expect(cold.headers.get("retry-after")).toBe("5");
    // The failed refreshes say so once, not once a request.
    const warned = bed.h.lines.filter((line) =>
      line.msg === "Distribution keys not read again; serving what was read last"
    );
    expect(warned).toHaveLength(1);

    await postgres.start();
    await waitUntil(async () => (await extract(unseen.key)).status === 200, {
      timeoutMs: 30_000,
      message: "the unseen key to be read once Postgres is back",
    });
  }, 120_000);
});
